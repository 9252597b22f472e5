import { useState } from 'preact/hooks';
import { type Api, api, get, post } from '../api';
import { askConfirm } from '../confirm';
import {
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  Loading,
  ShownOnce,
  Table,
  useAction,
  useLoad,
} from '../ui';
import { type AccountField, PROVIDER_ACCOUNTS, type SlugAccount } from './providerAccounts.gen';

/** The attach form's slug list and each slug's fields: the providers' declarations (generated). */
function accountOf(slug: string): SlugAccount {
  return PROVIDER_ACCOUNTS.find((p) => p.slug === slug) ?? PROVIDER_ACCOUNTS[0];
}

/** One account field's input, as its JSON Schema says: a choice, a number, a secret, or text. */
function FieldInput({
  name,
  field,
  required,
}: {
  name: string;
  field: AccountField;
  required: boolean;
}) {
  if (field.enum)
    return (
      <select name={name}>
        <option value="">default</option>
        {field.enum.map((v) => (
          <option key={v}>{v}</option>
        ))}
      </select>
    );
  return (
    <input
      name={name}
      required={required}
      type={field.writeOnly ? 'password' : field.type === 'integer' ? 'number' : 'text'}
      autoComplete="off"
    />
  );
}

export function ProvidersScreen({ projectId }: { projectId: string }) {
  const providers = useLoad(
    () => get<Api.ProviderList>(`/projects/${projectId}/providers`),
    [projectId],
  );
  const action = useAction();
  const [slug, setSlug] = useState<string>(PROVIDER_ACCOUNTS[0].slug);
  const { account } = accountOf(slug);
  const [checks, setChecks] = useState<Record<string, Api.ConnectionCheck>>({});
  const [editing, setEditing] = useState<string | null>(null);
  const [feedbackShown, setFeedbackShown] = useState<{ label: string; url: string } | null>(null);
  const list = providers.data?.providers ?? [];
  // An answer whose feedback URL carries the webhook secret (attach, or an edit that replaced it): shown this once.
  const showFeedbackOnce = (p: Api.ProviderAccount) => {
    if (p.feedback_url && p.credentials.webhook_secret && !p.feedback_url.includes('••'))
      setFeedbackShown({
        label: `Feedback URL of ${p.vendor}${p.label ? ` "${p.label}"` : ''} (${p.id}), with its secret`,
        url: p.feedback_url,
      });
  };
  return (
    <section>
      <h1>Providers</h1>
      {feedbackShown && (
        <ShownOnce
          label={feedbackShown.label}
          value={feedbackShown.url}
          onDone={() => setFeedbackShown(null)}
        />
      )}
      <ErrorNote error={providers.error} />
      {!providers.data && !providers.error && <Loading what="providers" />}
      {providers.data && list.length === 0 && (
        <Empty title="No provider accounts on this project.">
          <p>Attach one below: production mail waits in the queue until a provider can take it.</p>
        </Empty>
      )}
      {list.length > 0 && (
        <Table
          label="Provider accounts"
          head={['Account', 'Where', 'Priority', 'Free quota / month', 'Check']}
          actions
        >
          {list.map((p) => {
            const check = checks[p.id];
            return (
              <tr key={p.id}>
                <td class="wrap">
                  <strong>{p.vendor}</strong> <span class="muted">{p.slug}</span>
                  {p.label && <div data-testid="provider-label">{p.label}</div>}
                  <div class="muted">{p.id}</div>
                </td>
                <td class="wrap">
                  {p.host
                    ? `${p.host}:${p.port ?? ''} ${p.tls ?? ''}`
                    : (p.endpoint ?? p.domain ?? p.region ?? '—')}
                  {p.feedback_url && (
                    <div class="feedback-url">
                      <span class="muted">Feedback URL: </span>
                      <code data-testid="feedback-url">{p.feedback_url}</code>
                      {!p.feedback_url.includes('••') && (
                        <CopyButton text={p.feedback_url} label="Copy URL" />
                      )}
                    </div>
                  )}
                  {editing === p.id && (
                    <form
                      class="card inline-form"
                      aria-label={`Edit ${p.vendor} account ${p.id}`}
                      onSubmit={async (e) => {
                        e.preventDefault();
                        const body: Record<string, string | null> = {};
                        new FormData(e.currentTarget).forEach((v, k) => {
                          if (typeof v !== 'string') return;
                          if (k === 'label') body.label = v.trim() === '' ? null : v.trim();
                          else if (v !== '') body[k] = v;
                        });
                        const changed = await action.run(() =>
                          api<Api.ProviderAccount>('PATCH', `/providers/${p.id}`, body),
                        );
                        if (changed) {
                          showFeedbackOnce(changed);
                          setEditing(null);
                          providers.reload();
                        }
                      }}
                    >
                      <Field label="Label">
                        <input
                          name="label"
                          maxLength={100}
                          defaultValue={p.label ?? ''}
                          placeholder="what this account is for"
                        />
                      </Field>
                      {Object.entries(accountOf(p.slug).account.properties)
                        .filter(
                          ([name, f]) =>
                            f.writeOnly || name === 'user' || name === 'webhook_public_key',
                        )
                        .map(([name, f]) => (
                          <Field
                            key={name}
                            label={f.writeOnly ? `${f.title} (new)` : f.title}
                            hint={
                              f.writeOnly
                                ? p.credentials[name as 'pass' | 'api_key' | 'webhook_secret']
                                  ? 'set; empty keeps it, a new one replaces it and is never shown again'
                                  : 'not set'
                                : undefined
                            }
                          >
                            <input
                              name={name}
                              type={f.writeOnly ? 'password' : 'text'}
                              autoComplete="off"
                              defaultValue={
                                f.writeOnly
                                  ? ''
                                  : String(p[name as 'user' | 'webhook_public_key'] ?? '')
                              }
                            />
                          </Field>
                        ))}
                      <button type="submit" class="primary small" disabled={action.busy}>
                        Save changes
                      </button>{' '}
                      <button type="button" class="small" onClick={() => setEditing(null)}>
                        Cancel
                      </button>
                    </form>
                  )}
                </td>
                <td colSpan={2}>
                  <form
                    class="row-form"
                    aria-label={`Priority and free quota of ${p.id}`}
                    onSubmit={async (e) => {
                      e.preventDefault();
                      const data = new FormData(e.currentTarget);
                      const quota = String(data.get('free_quota') ?? '').trim();
                      const changed = await action.run(() =>
                        api('PATCH', `/providers/${p.id}`, {
                          priority: Number(data.get('priority')),
                          free_quota: quota === '' ? null : Number(quota),
                        }),
                      );
                      if (changed) providers.reload();
                    }}
                  >
                    <input
                      name="priority"
                      type="number"
                      min={0}
                      required
                      aria-label="Priority"
                      defaultValue={String(p.priority)}
                    />
                    <input
                      name="free_quota"
                      type="number"
                      min={0}
                      aria-label="Free quota per month (empty: none)"
                      placeholder="none"
                      defaultValue={p.free_quota === null ? '' : String(p.free_quota)}
                    />
                    <button type="submit" class="small" disabled={action.busy}>
                      Save
                    </button>
                  </form>
                </td>
                <td class="wrap" aria-live="polite">
                  {check ? (
                    <span class={check.ok ? 'good' : check.ok === false ? 'bad' : 'muted'}>
                      {check.ok
                        ? 'OK'
                        : check.ok === false
                          ? `Failed at ${check.failed_at}`
                          : 'Not checkable'}
                      : {check.message} ({check.duration_ms} ms)
                    </span>
                  ) : (
                    '—'
                  )}
                </td>
                <td class="nowrap">
                  <button
                    type="button"
                    class="small"
                    aria-expanded={editing === p.id}
                    onClick={() => setEditing(editing === p.id ? null : p.id)}
                  >
                    Edit
                  </button>{' '}
                  <button
                    type="button"
                    class="small"
                    disabled={action.busy}
                    onClick={async () => {
                      const r = await action.run(() =>
                        post<Api.ConnectionCheck>(`/providers/${p.id}/check`),
                      );
                      if (r) setChecks({ ...checks, [p.id]: r });
                    }}
                  >
                    Check connection
                  </button>{' '}
                  <button
                    type="button"
                    class="small danger"
                    disabled={action.busy}
                    onClick={async () =>
                      (await askConfirm({
                        title: `Detach ${p.slug} (${p.id})?`,
                        body: <p>The project no longer sends through this account.</p>,
                        confirm: 'Detach the account',
                        cancel: 'Keep it',
                        danger: true,
                      })) &&
                      (await action.run(() => api('DELETE', `/providers/${p.id}`))) &&
                      providers.reload()
                    }
                  >
                    Detach
                  </button>
                </td>
              </tr>
            );
          })}
        </Table>
      )}
      <ErrorNote error={action.error} />
      <form
        class="card inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const body: Record<string, string | number> = { slug };
          new FormData(form).forEach((v, k) => {
            if (typeof v !== 'string' || v.trim() === '' || k === 'slug') return;
            body[k] =
              account.properties[k]?.type === 'integer' || k === 'priority' || k === 'free_quota'
                ? Number(v)
                : v.trim();
          });
          const attached = await action.run(() =>
            post<Api.ProviderAccount>(`/projects/${projectId}/providers`, body),
          );
          if (attached) {
            showFeedbackOnce(attached);
            form.reset();
            providers.reload();
          }
        }}
      >
        <h2>Attach a provider account</h2>
        <Field label="Provider">
          <select name="slug" value={slug} onChange={(e) => setSlug(e.currentTarget.value)}>
            {PROVIDER_ACCOUNTS.map((p) => (
              <option key={p.slug} value={p.slug}>
                {p.slug} ({p.title})
              </option>
            ))}
          </select>
        </Field>
        {Object.entries(account.properties).map(([name, field]) => {
          const required = account.required.includes(name);
          return (
            <Field
              key={slug + name}
              label={field.title + (required ? '' : ' (optional)')}
              hint={field.description}
            >
              <FieldInput name={name} field={field} required={required} />
            </Field>
          );
        })}
        <Field label="Label (optional)" hint="what this account is for, e.g. transactional, EU">
          <input name="label" maxLength={100} />
        </Field>
        <Field label="Priority (optional)" hint="lower goes first; default 100">
          <input name="priority" type="number" min={0} />
        </Field>
        <Field label="Free quota per month (optional)">
          <input name="free_quota" type="number" min={0} />
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          Attach
        </button>
      </form>
    </section>
  );
}
