import { useState } from 'preact/hooks';
import { type Api, api, get, post } from '../api';
import { askConfirm } from '../confirm';
import {
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  Time,
  useAction,
  useLoad,
} from '../ui';

export function DkimScreen({ projectId }: { projectId: string }) {
  const keys = useLoad(() => get<Api.DkimList>(`/projects/${projectId}/dkim`), [projectId]);
  const action = useAction();
  const [added, setAdded] = useState<string | null>(null);
  const list = keys.data?.keys ?? [];
  return (
    <section>
      <h1>DKIM</h1>
      <ErrorNote error={keys.error} />
      {!keys.data && !keys.error && <Loading what="DKIM keys" />}
      {keys.data && list.length === 0 && (
        <Empty title="No DKIM keys yet.">
          <p>
            Add a key for each sending domain below, then publish the TXT record it shows in that
            domain's DNS.
          </p>
        </Empty>
      )}
      {list.map((k) => (
        <article
          key={k.id}
          class="card"
          aria-label={`DKIM key ${k.selector}._domainkey.${k.domain}`}
        >
          {k.id === added && (
            <p class="note" role="status">
              Key added. Mail from {k.domain} is signed with it from now on: publish this record in{' '}
              {k.domain}'s DNS so receivers can check the signatures.
            </p>
          )}
          <h2>
            {k.domain} <span class="muted">selector {k.selector}</span>
          </h2>
          <p class="muted">
            {k.algorithm} · added <Time iso={k.created_at} />
          </p>
          <p>Publish this TXT record:</p>
          <div class="secret-row">
            <code class="break">{k.dns_name}</code>
            <CopyButton text={k.dns_name} label="Copy name" />
          </div>
          <div class="secret-row">
            <code class="break dns-value">{k.dns_value}</code>
            <CopyButton text={k.dns_value} label="Copy value" />
          </div>
          <button
            type="button"
            class="small danger"
            disabled={action.busy}
            onClick={async () =>
              (await askConfirm({
                title: `Remove the key for ${k.domain}?`,
                body: (
                  <p>
                    Mail from {k.domain} is no longer signed with selector {k.selector}.
                  </p>
                ),
                confirm: 'Remove the key',
                cancel: 'Keep it',
                danger: true,
              })) &&
              (await action.run(() => api('DELETE', `/dkim/${k.id}`))) &&
              keys.reload()
            }
          >
            Remove
          </button>
        </article>
      ))}
      <form
        class="card inline-form"
        onSubmit={async (e) => {
          const v = formValues(e);
          const form = e.currentTarget;
          const added = await action.run(() =>
            post<Api.DkimKey>(`/projects/${projectId}/dkim`, {
              domain: v.domain,
              selector: v.selector,
              algorithm: v.algorithm,
            }),
          );
          if (added) {
            form.reset();
            setAdded(added.id);
            keys.reload();
          }
        }}
      >
        <h2>Add a key (generated on the server)</h2>
        <Field label="Domain">
          <input name="domain" required placeholder="example.com" />
        </Field>
        <Field label="Selector">
          <input name="selector" required placeholder="postern1" />
        </Field>
        <Field label="Algorithm">
          {/* The API takes the key type; signatures are rsa-sha256 or ed25519-sha256. */}
          <select name="algorithm">
            <option value="rsa">RSA 2048 (rsa-sha256)</option>
            <option value="ed25519">Ed25519 (ed25519-sha256)</option>
          </select>
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          Add key
        </button>
      </form>
      <ErrorNote error={action.error} />
    </section>
  );
}
