/**
 * Domains: the project's sending domains (its DKIM keys' and those its mail came from), each
 * checked in DNS when the screen opens: every record it needs, present / missing / different,
 * with the exact value to publish and a copy button. Any other domain can be checked too.
 */
import { useState } from 'preact/hooks';
import { type Api, get } from '../api';
import {
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  Table,
  Time,
  useLoad,
} from '../ui';

const STATE_TEXT: Record<Api.DomainRecord['state'], string> = {
  present: 'present',
  missing: 'missing',
  different: 'different',
  lookup_failed: 'no answer',
};
const PURPOSE_TEXT: Record<Api.DomainRecord['purpose'], string> = {
  dkim: 'DKIM',
  spf: 'SPF',
  dmarc: 'DMARC',
  return_path: 'Bounce domain',
  verification: 'Provider verification',
};

function statusText(check: Api.DomainCheck): string {
  const todo = check.records.filter((r) => r.state === 'missing' || r.state === 'different').length;
  if (check.status === 'ok') return 'All records published';
  if (check.status === 'incomplete') return 'Some lookups got no answer';
  return todo === 1
    ? '1 record to publish or fix'
    : todo > 0
      ? `${todo} records to publish or fix`
      : 'A record to fix';
}

function RecordRow({ r }: { r: Api.DomainRecord }) {
  const label = `${PURPOSE_TEXT[r.purpose]} ${r.type} ${r.name}`;
  return (
    <>
      <tr aria-label={label}>
        <td>
          <span class={`badge dns-${r.state}`}>{STATE_TEXT[r.state]}</span>
        </td>
        <td>
          {PURPOSE_TEXT[r.purpose]} <span class="muted">{r.type}</span>
        </td>
        <td>
          <div class="secret-row">
            <code class="break">{r.name}</code>
            <CopyButton text={r.name} label="Copy name" />
          </div>
        </td>
        <td>
          <div class="secret-row">
            <code class="break dns-value" data-testid="value">
              {r.value}
            </code>
            {r.value_exact ? (
              <CopyButton text={r.value} label="Copy value" />
            ) : (
              <span class="muted">from the provider</span>
            )}
          </div>
          {r.note && <p class="hint">{r.note}</p>}
        </td>
        <td>
          {r.found.length === 0 ? (
            <span class="muted">nothing</span>
          ) : (
            <ul class="found">
              {r.found.map((f, i) => (
                <li key={i}>
                  <code class="break">{f}</code>
                </li>
              ))}
            </ul>
          )}
        </td>
      </tr>
      {r.problems.length > 0 && (
        <tr class="problems">
          <td colSpan={5}>
            {r.problems.map((p) => (
              <p key={p.code} class={p.severity === 'error' ? 'error' : 'warning'}>
                {p.message}
              </p>
            ))}
          </td>
        </tr>
      )}
    </>
  );
}

function DomainCard({ projectId, domain }: { projectId: string; domain: Api.SendingDomain }) {
  const check = useLoad(
    () =>
      get<Api.DomainCheck>(
        `/projects/${projectId}/domains/${encodeURIComponent(domain.domain)}/check`,
      ),
    [projectId, domain.domain],
  );
  const sources = [
    ...domain.dkim_keys.map((k) => `DKIM selector ${k.selector}`),
    ...(domain.sent_from ? ['mail sent from it'] : []),
  ];
  const data = check.data;
  return (
    <article class="card" aria-label={`Domain ${domain.domain}`}>
      <h2>
        {domain.domain}{' '}
        {data && (
          <span class={`badge domain-${data.status}`} role="status">
            {statusText(data)}
          </span>
        )}
      </h2>
      <p class="muted">
        {sources.length > 0 ? sources.join(' · ') : 'checked on request'}
        {data && (
          <>
            {' '}
            · looked up <Time iso={data.checked_at} />
          </>
        )}
      </p>
      <ErrorNote error={check.error} />
      {!data && !check.error && <Loading what={`the DNS records of ${domain.domain}`} />}
      {data && (
        <Table
          label={`DNS records of ${domain.domain}`}
          head={['State', 'Record', 'Name', 'Value to publish', 'Found in DNS']}
        >
          {data.records.map((r, i) => (
            <RecordRow key={i} r={r} />
          ))}
        </Table>
      )}
      {data && data.notes.length > 0 && (
        <div class="note">
          <p>Not checked here:</p>
          <ul>
            {data.notes.map((n, i) => (
              <li key={i}>{n.text}</li>
            ))}
          </ul>
        </div>
      )}
      <button type="button" class="small" disabled={check.loading} onClick={check.reload}>
        {check.loading && data ? 'Checking…' : 'Check again'}
      </button>
    </article>
  );
}

export function DomainsScreen({ projectId }: { projectId: string }) {
  const domains = useLoad(
    () => get<Api.SendingDomainList>(`/projects/${projectId}/domains`),
    [projectId],
  );
  /** Domains asked for on this screen, besides the project's own. */
  const [asked, setAsked] = useState<string[]>([]);
  const listed = domains.data?.domains ?? [];
  const extra = asked
    .filter((d) => !listed.some((l) => l.domain === d))
    .map((d): Api.SendingDomain => ({ domain: d, dkim_keys: [], sent_from: false }));
  return (
    <section>
      <h1>Domains</h1>
      <p class="muted">
        The DNS records each sending domain needs for this project's mail: its DKIM keys, the SPF
        includes of its providers, DMARC, and each provider's bounce and verification records,
        looked up now.
      </p>
      <ErrorNote error={domains.error} />
      {!domains.data && !domains.error && <Loading what="sending domains" />}
      {domains.data && listed.length === 0 && extra.length === 0 && (
        <Empty title="No sending domains yet.">
          <p>
            A domain appears here once the project has a DKIM key for it or has sent mail from it.
            Check any domain below.
          </p>
        </Empty>
      )}
      {[...listed, ...extra].map((d) => (
        <DomainCard key={d.domain} projectId={projectId} domain={d} />
      ))}
      <form
        class="card inline-form"
        onSubmit={(e) => {
          const form = e.currentTarget;
          const domain = formValues(e).domain.toLowerCase().replace(/\.$/, '');
          if (domain && !asked.includes(domain)) setAsked([...asked, domain]);
          form.reset();
        }}
      >
        <h2>Check another domain</h2>
        <Field label="Domain">
          <input name="domain" required placeholder="example.com" />
        </Field>
        <button type="submit" class="primary">
          Check
        </button>
      </form>
    </section>
  );
}
