/**
 * A project's API keys: each with its name (what it is for), hint, mode, state and dates; a new
 * key is shown once. Revoked keys are hidden until asked for: they never work again.
 */
import { useState } from 'preact/hooks';
import { type Api, get, post } from '../api';
import { askConfirm } from '../confirm';
import {
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  ShownOnce,
  Table,
  Time,
  useAction,
  useLoad,
} from '../ui';

export function KeysScreen({ projectId }: { projectId: string }) {
  const keys = useLoad(() => get<Api.KeyList>(`/projects/${projectId}/keys`), [projectId]);
  const action = useAction();
  const [shown, setShown] = useState<{ label: string; key: string } | null>(null);
  const [grace, setGrace] = useState('86400');
  const [showRevoked, setShowRevoked] = useState(false);
  const all = keys.data?.keys ?? [];
  const revoked = all.filter((k) => k.state === 'revoked').length;
  const list = showRevoked ? all : all.filter((k) => k.state !== 'revoked');
  return (
    <section>
      <h1>API keys</h1>
      {shown && <ShownOnce label={shown.label} value={shown.key} onDone={() => setShown(null)} />}
      <form
        class="inline-form"
        onSubmit={async (e) => {
          const v = formValues(e);
          const form = e.currentTarget;
          const created = await action.run(() =>
            post<Api.KeyCreated>(`/projects/${projectId}/keys`, {
              name: v.name,
              mode: v.mode,
              ...(v.expires_at ? { expires_at: new Date(v.expires_at).toISOString() } : {}),
            }),
          );
          if (created) {
            form.reset();
            setShown({ label: `New ${created.mode} key "${created.name}"`, key: created.key });
            keys.reload();
          }
        }}
      >
        <Field label="Name" hint="what uses it: billing worker, staging site…">
          <input name="name" required maxLength={100} />
        </Field>
        <Field label="Mode" hint="live keys send for real; test keys go to the sandbox">
          <select name="mode">
            <option value="test">test (sandbox)</option>
            <option value="live">live</option>
          </select>
        </Field>
        <Field label="Expires (optional)">
          <input name="expires_at" type="datetime-local" />
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          Create key
        </button>
      </form>
      <ErrorNote error={action.error} />
      <ErrorNote error={keys.error} />
      {!keys.data && !keys.error && <Loading what="keys" />}
      {revoked > 0 && (
        <label class="check-label">
          <input
            type="checkbox"
            checked={showRevoked}
            onChange={(e) => setShowRevoked(e.currentTarget.checked)}
          />{' '}
          Show revoked keys ({revoked})
        </label>
      )}
      {keys.data && all.length === 0 && (
        <Empty title="No keys yet.">
          <p>
            Create a test key to send to the sandbox while you build, and a live key for production.
          </p>
        </Empty>
      )}
      {list.length > 0 && (
        <>
          <p class="muted">
            Rotating makes a new key; the old one keeps working for{' '}
            <select
              aria-label="Grace after rotation"
              value={grace}
              onChange={(e) => setGrace(e.currentTarget.value)}
            >
              <option value="0">no time</option>
              <option value="3600">1 hour</option>
              <option value="86400">1 day</option>
              <option value="604800">7 days</option>
            </select>
            .
          </p>
          <Table
            label="API keys"
            head={['Name', 'Key', 'Mode', 'State', 'Created', 'Last used', 'Expires']}
            actions
          >
            {list.map((k) => (
              <tr key={k.id} data-id={k.id}>
                <td>{k.name || <span class="muted">(no name)</span>}</td>
                <td>
                  <code>{k.hint}</code>
                </td>
                <td>{k.mode}</td>
                <td>
                  <span class={`badge key-${k.state}`}>{k.state}</span>
                </td>
                <td>
                  <Time iso={k.created_at} />
                </td>
                <td>
                  <Time iso={k.last_used_at} />
                </td>
                <td>
                  <Time iso={k.revoked_at ?? k.expires_at} />
                </td>
                <td class="nowrap">
                  {k.state === 'active' && (
                    <>
                      <button
                        type="button"
                        class="small"
                        disabled={action.busy}
                        onClick={async () => {
                          const r = await action.run(() =>
                            post<Api.KeyRotated>(`/keys/${k.id}/rotate`, {
                              grace_seconds: Number(grace),
                            }),
                          );
                          if (r) {
                            setShown({
                              label: `New ${r.key.mode} key "${r.key.name}" (replaces ${k.hint})`,
                              key: r.key.key,
                            });
                            keys.reload();
                          }
                        }}
                      >
                        Rotate
                      </button>{' '}
                      <button
                        type="button"
                        class="small danger"
                        disabled={action.busy}
                        onClick={async () =>
                          (await askConfirm({
                            title: `Revoke ${k.name ? `"${k.name}" (${k.hint})` : k.hint}?`,
                            body: (
                              <p>It stops working at once: every request with it is refused.</p>
                            ),
                            confirm: 'Revoke the key',
                            cancel: 'Keep it',
                            danger: true,
                          })) &&
                          (await action.run(() => post(`/keys/${k.id}/revoke`))) &&
                          keys.reload()
                        }
                      >
                        Revoke
                      </button>
                    </>
                  )}
                </td>
              </tr>
            ))}
          </Table>
        </>
      )}
    </section>
  );
}
