/**
 * One message: summary, actions (release / cancel / retry now / share / delete a capture), the
 * HTML in a sandboxed frame (served by the API as an inert document: no scripts, remote loads
 * blocked until asked), text, headers, raw download, attachments, timeline and recipients.
 */
import { useState } from 'preact/hooks';
import { API_BASE, api, get, post, type Api } from '../api';
import { useLiveMessages } from '../live';
import { href, navigate } from '../router';
import { bytes, CopyButton, ErrorNote, Loading, SandboxMarker, StatusBadge, Table, Time, useAction, useLoad } from '../ui';

const TABS = ['Preview', 'Text', 'Headers', 'Attachments', 'Timeline', 'Recipients', 'Details'] as const;
type Tab = (typeof TABS)[number];

const RELEASABLE = ['paused', 'captured'];
const CANCELLABLE = ['queued', 'scheduled', 'paused', 'captured'];

export function MessageScreen({ id }: { id: string }) {
  const detail = useLoad(() => get<Api.MessageDetail>(`/messages/${encodeURIComponent(id)}`), [id]);
  const content = useLoad(() => get<Api.MessageContent>(`/messages/${encodeURIComponent(id)}/content`), [id]);
  const [tab, setTab] = useState<Tab>('Preview');
  const action = useAction();
  const [link, setLink] = useState<Api.ViewerLink | null>(null);
  const [expiry, setExpiry] = useState('604800');
  const m = detail.data;
  useLiveMessages({ project: m?.project_id }, (c) => c.id === id && detail.reload(), detail.reload);

  const act = async (verb: 'release' | 'cancel' | 'retry') => {
    const done = await action.run(() => post<Api.MessageSummary>(`/messages/${encodeURIComponent(id)}/${verb}`));
    if (done) detail.reload();
  };
  if (detail.error) return <ErrorNote error={detail.error} />;
  if (!m) return <Loading what="the message" />;
  const retryable = m.status === 'queued' && m.attempts > 0;
  return (
    <section>
      <p>
        <a href={m.sandbox ? href(`/projects/${m.project_id}/inbox`) : href('/messages')}>← {m.sandbox ? 'Sandbox inbox' : 'Messages'}</a>
      </p>
      <h1 class="subject">{m.subject || '(no subject)'}</h1>
      <p class="summary-line">
        <StatusBadge status={m.status} /> {m.sandbox && <SandboxMarker />} {m.paused && m.hold_reason && <span class="badge">held: {m.hold_reason}</span>}{' '}
        <span class="muted">
          {m.id} · project {m.project_id} · via {m.source}
        </span>
      </p>
      <div class="actions" role="group" aria-label="Message actions">
        <button type="button" disabled={!RELEASABLE.includes(m.status) || action.busy} onClick={() => act('release')}>
          Release
        </button>
        <button type="button" disabled={!CANCELLABLE.includes(m.status) || action.busy} onClick={() => confirm('Cancel this message? It will not be sent.') && act('cancel')}>
          Cancel
        </button>
        <button type="button" disabled={!retryable || action.busy} onClick={() => act('retry')}>
          Retry now
        </button>
        <a class="button" href={`${API_BASE}/messages/${encodeURIComponent(id)}/raw`} download={`${id}.eml`}>
          Download .eml
        </a>
        {m.status === 'captured' && (
          <button
            type="button"
            class="danger"
            disabled={action.busy}
            onClick={async () => {
              if (!confirm('Delete this captured message for good?')) return;
              if (await action.run(() => api('DELETE', `/messages/${encodeURIComponent(id)}`))) navigate(href(`/projects/${m.project_id}/inbox`));
            }}
          >
            Delete
          </button>
        )}
        <span class="share">
          <label>
            <span class="visually-hidden">Link expiry</span>
            <select value={expiry} onChange={(e) => setExpiry(e.currentTarget.value)} aria-label="Link expiry">
              <option value="3600">1 hour</option>
              <option value="86400">1 day</option>
              <option value="604800">7 days</option>
              <option value="2592000">30 days</option>
            </select>
          </label>
          <button type="button" disabled={action.busy} onClick={async () => setLink((await action.run(() => post<Api.ViewerLink>(`/messages/${encodeURIComponent(id)}/link`, { expires_in_seconds: Number(expiry) }))) ?? null)}>
            Share
          </button>
        </span>
      </div>
      <ErrorNote error={action.error} />
      {link && (
        <div class="note share-link" role="status">
          Public link (anyone with it can read this message until <Time iso={link.expires_at} />):{' '}
          <a href={link.url} target="_blank" rel="noopener noreferrer" class="break">
            {link.url}
          </a>{' '}
          <CopyButton text={link.url} />
        </div>
      )}
      <dl class="facts">
        <dt>From</dt>
        <dd>{m.from}</dd>
        <dt>To</dt>
        <dd>{m.to.join(', ')}</dd>
        {m.cc.length > 0 && (
          <>
            <dt>Cc</dt>
            <dd>{m.cc.join(', ')}</dd>
          </>
        )}
        {m.bcc.length > 0 && (
          <>
            <dt>Bcc</dt>
            <dd>{m.bcc.join(', ')}</dd>
          </>
        )}
        <dt>Created</dt>
        <dd>
          <Time iso={m.created_at} />
        </dd>
        {m.scheduled_at && (
          <>
            <dt>Scheduled</dt>
            <dd>
              <Time iso={m.scheduled_at} />
            </dd>
          </>
        )}
        {m.next_attempt_at && (
          <>
            <dt>Next attempt</dt>
            <dd>
              <Time iso={m.next_attempt_at} /> (attempt {m.attempts + 1})
            </dd>
          </>
        )}
        {m.last_error && (
          <>
            <dt>Last error</dt>
            <dd class="wrap">{m.last_error}</dd>
          </>
        )}
      </dl>
      <div class="tabs" role="tablist" aria-label="Message parts">
        {TABS.map((t) => (
          <button key={t} type="button" role="tab" aria-selected={tab === t} class={tab === t ? 'tab active' : 'tab'} onClick={() => setTab(t)}>
            {t}
          </button>
        ))}
      </div>
      <div class="tab-panel" role="tabpanel" aria-label={tab}>
        {tab === 'Preview' && <Preview id={id} content={content.data} error={content.error} />}
        {tab === 'Text' && <pre class="text-body">{content.data ? (content.data.text ?? '(no text part)') : 'Loading…'}</pre>}
        {tab === 'Headers' && <Headers content={content.data} />}
        {tab === 'Attachments' && <Attachments id={id} content={content.data} />}
        {tab === 'Timeline' && <Timeline entries={m.timeline} />}
        {tab === 'Recipients' && <Recipients list={m.recipients} />}
        {tab === 'Details' && <Details m={m} />}
      </div>
    </section>
  );
}

function Preview({ id, content, error }: { id: string; content: Api.MessageContent | undefined; error: unknown }) {
  const [images, setImages] = useState(false);
  if (error) return <ErrorNote error={error} />;
  if (!content) return <Loading what="the message body" />;
  if (content.html === null && content.text === null) return <p class="muted">This message has no body.</p>;
  return (
    <>
      <p class="muted">
        {images ? 'Remote images are shown.' : 'Remote images are blocked.'}{' '}
        {!images && (
          <button type="button" class="link" onClick={() => setImages(true)}>
            Show remote images
          </button>
        )}
        {content.html_truncated && ' The HTML is cut at 2 MB; download the .eml for all of it.'}
      </p>
      <iframe
        class="preview"
        title="Message preview"
        sandbox="allow-popups allow-popups-to-escape-sandbox"
        referrerpolicy="no-referrer"
        src={`${API_BASE}/messages/${encodeURIComponent(id)}/preview${images ? '?images=1' : ''}`}
      />
    </>
  );
}

function Headers({ content }: { content: Api.MessageContent | undefined }) {
  if (!content) return <Loading what="headers" />;
  return (
    <Table label="Headers">
      <tbody>
        {content.headers.map((h, i) => (
          <tr key={i}>
            <th scope="row" class="nowrap">
              {h.name}
            </th>
            <td class="wrap">{h.value}</td>
          </tr>
        ))}
      </tbody>
    </Table>
  );
}

function Attachments({ id, content }: { id: string; content: Api.MessageContent | undefined }) {
  if (!content) return <Loading what="attachments" />;
  if (content.attachments.length === 0) return <p class="muted">No attachments.</p>;
  return (
    <ul>
      {content.attachments.map((a) => (
        <li key={a.index}>
          <a href={`${API_BASE}/messages/${encodeURIComponent(id)}/attachments/${a.index}`} download={a.filename ?? `attachment-${a.index}`}>
            {a.filename ?? `(unnamed ${a.index + 1})`}
          </a>{' '}
          <span class="muted">
            {a.content_type}, {bytes(a.size)}
            {a.disposition === 'inline' ? ', inline' : ''}
          </span>
        </li>
      ))}
    </ul>
  );
}

function Timeline({ entries }: { entries: Api.TimelineEntry[] }) {
  if (entries.length === 0) return <p class="muted">Nothing has happened yet.</p>;
  return (
    <ol class="timeline">
      {entries.map((e, i) => (
        <li key={i}>
          <Time iso={e.at} />{' '}
          {e.kind === 'event' ? (
            <strong>{e.type}</strong>
          ) : (
            <>
              <strong>hand-off to {e.provider ?? 'provider'}</strong>: {e.outcome} in {e.duration_ms} ms
              {e.reply && <div class="reply">{e.reply}</div>}
            </>
          )}
        </li>
      ))}
    </ol>
  );
}

function Recipients({ list }: { list: Api.RecipientState[] }) {
  return (
    <Table label="Recipients" head={['Recipient', 'As', 'Outcome', 'Reply']}>
        {list.map((r) => (
          <tr key={r.kind + r.email}>
            <td>{r.email}</td>
            <td>{r.kind}</td>
            <td>
              <StatusBadge status={r.status} />
            </td>
            <td class="wrap">{r.reply ?? '—'}</td>
          </tr>
        ))}
      </Table>
  );
}

function Details({ m }: { m: Api.MessageDetail }) {
  return (
    <dl class="facts">
      <dt>Category</dt>
      <dd>{m.category ?? '—'}</dd>
      <dt>Tags</dt>
      <dd>{m.tags.length ? m.tags.join(', ') : '—'}</dd>
      <dt>Metadata</dt>
      <dd>
        <pre class="code">{JSON.stringify(m.metadata, null, 2)}</pre>
      </dd>
      <dt>Routing</dt>
      <dd>
        <pre class="code">{JSON.stringify(m.routing, null, 2)}</pre>
      </dd>
      <dt>Provider</dt>
      <dd>
        {m.provider ?? '—'} {m.provider_message_id && <span class="muted">({m.provider_message_id})</span>}
      </dd>
      <dt>Size</dt>
      <dd>{m.size_bytes === undefined ? "—" : bytes(m.size_bytes)}</dd>
      <dt>Idempotency key</dt>
      <dd>{m.idempotency_key ?? '—'}</dd>
      <dt>Updated</dt>
      <dd>
        <Time iso={m.updated_at} />
      </dd>
    </dl>
  );
}
