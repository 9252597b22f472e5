/**
 * One message: summary, actions (release / cancel / retry now / share / delete a capture), the
 * HTML in a sandboxed frame (served by the API as an inert document: no scripts, its own inline
 * images, remote loads blocked until asked), text, headers, raw download, attachments, timeline
 * and recipients. Each message opens clean (the shell keys this screen by id). Release asks
 * first, naming who the message goes to; retry says what it did. The message's public links
 * that still open it are listed, each revocable. The parts' tabs follow the WAI-ARIA tabs
 * pattern (arrow keys, Home and End move between them).
 */
import { Fragment } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { API_BASE, type Api, api, get, post } from '../api';
import { askConfirm } from '../confirm';
import { useLiveMessages } from '../live';
import { href, navigate } from '../router';
import {
  bytes,
  CopyButton,
  ErrorNote,
  Loading,
  SandboxMarker,
  StatusBadge,
  Table,
  Time,
  useAction,
  useLoad,
  usePageTitle,
} from '../ui';

const TABS = [
  'Preview',
  'Text',
  'Headers',
  'Attachments',
  'Timeline',
  'Recipients',
  'Details',
] as const;
type Tab = (typeof TABS)[number];

const RELEASABLE = ['paused', 'captured'];
const CANCELLABLE = ['queued', 'scheduled', 'paused', 'captured'];

/** Everyone a message goes to, as the release dialog names them. */
function RecipientList({ m }: { m: Api.MessageDetail }) {
  const groups = [
    ['To', m.to],
    ['Cc', m.cc],
    ['Bcc', m.bcc],
  ] as const;
  return (
    <dl class="facts recipients-to-be">
      {groups
        .filter(([, list]) => list.length > 0)
        .map(([label, list]) => (
          <Fragment key={label}>
            <dt>{label}</dt>
            <dd>{list.join(', ')}</dd>
          </Fragment>
        ))}
    </dl>
  );
}

export function MessageScreen({ id }: { id: string }) {
  const detail = useLoad(() => get<Api.MessageDetail>(`/messages/${encodeURIComponent(id)}`), [id]);
  const content = useLoad(
    () => get<Api.MessageContent>(`/messages/${encodeURIComponent(id)}/content`),
    [id],
  );
  const [tab, setTab] = useState<Tab>('Preview');
  const action = useAction();
  const [link, setLink] = useState<Api.ViewerLink | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [expiry, setExpiry] = useState('604800');
  /** Deleted (here, or elsewhere as announced): never asked for again. */
  const [gone, setGone] = useState(false);
  const deleting = useRef(false);
  const m = detail.data;
  usePageTitle(m ? m.subject || '(no subject)' : 'Message');
  const links = useLoad(
    () => get<Api.ViewerLinkList>(`/messages/${encodeURIComponent(id)}/links`),
    [id],
  );
  useLiveMessages(
    { project: m?.project_id },
    (c) => {
      if (c.id !== id || deleting.current) return;
      if (c.status === 'deleted') setGone(true);
      else detail.reload();
    },
    () => !deleting.current && !gone && detail.reload(),
  );

  const act = async (verb: 'release' | 'cancel' | 'retry') => {
    setDone(null);
    const result = await action.run(() =>
      post<Api.MessageSummary>(`/messages/${encodeURIComponent(id)}/${verb}`),
    );
    if (!result) return;
    detail.reload();
    if (verb === 'retry')
      setDone(
        `Retry now: the message is due at once; its next attempt (attempt ${(m?.attempts ?? 0) + 1}) starts as soon as a delivery slot is free.`,
      );
    if (verb === 'release')
      setDone(
        result.status === 'scheduled'
          ? 'Released: it is scheduled, and goes at its scheduled time.'
          : 'Released: it is queued for delivery now.',
      );
    if (verb === 'cancel') setDone('Cancelled: it will not be sent.');
  };
  const release = async (msg: Api.MessageDetail) => {
    const count = msg.to.length + msg.cc.length + msg.bcc.length;
    const ok = await askConfirm({
      title: msg.sandbox
        ? 'Release this sandbox message to its real recipients?'
        : 'Release this message?',
      body: (
        <>
          <p>
            {msg.sandbox
              ? "It was captured by the sandbox and never left. Released, it is delivered for real, through the project's providers, to:"
              : "It is delivered now, through the project's providers, to:"}
          </p>
          <RecipientList m={msg} />
        </>
      ),
      confirm: `Release and send to ${count} recipient${count === 1 ? '' : 's'}`,
      cancel: 'Keep it held',
    });
    if (ok) await act('release');
  };
  const remove = async (msg: Api.MessageDetail) => {
    const ok = await askConfirm({
      title: 'Delete this captured message?',
      body: <p>It is removed for good, with its file; nothing is sent.</p>,
      confirm: 'Delete it',
      cancel: 'Keep it',
      danger: true,
    });
    if (!ok) return;
    deleting.current = true;
    if (await action.run(() => api('DELETE', `/messages/${encodeURIComponent(id)}`))) {
      setGone(true);
      // Back does not return to a message that is gone.
      navigate(href(`/projects/${msg.project_id}/inbox`), { replace: true });
    } else deleting.current = false;
  };
  if (gone)
    return (
      <section>
        <p class="note" role="status">
          This message was deleted.{' '}
          <a href={m ? href(`/projects/${m.project_id}/inbox`) : href('/messages')}>
            Back to the list
          </a>
        </p>
      </section>
    );
  if (detail.error) return <ErrorNote error={detail.error} />;
  if (!m) return <Loading what="the message" />;
  const retryable = m.status === 'queued' && m.attempts > 0;
  return (
    <section>
      <p>
        <a href={m.sandbox ? href(`/projects/${m.project_id}/inbox`) : href('/messages')}>
          ← {m.sandbox ? 'Sandbox inbox' : 'Messages'}
        </a>
      </p>
      <h1 class="subject">{m.subject || '(no subject)'}</h1>
      <p class="summary-line">
        <StatusBadge status={m.status} /> {m.sandbox && <SandboxMarker />}{' '}
        {m.paused && m.hold_reason && <span class="badge">held: {m.hold_reason}</span>}{' '}
        <span class="muted">
          {m.id} · project {m.project_id} · via {m.source}
        </span>
      </p>
      {/* biome-ignore lint/a11y/useSemanticElements: a group of buttons, not of form fields (no fieldset) */}
      <div class="actions" role="group" aria-label="Message actions">
        <button
          type="button"
          disabled={!RELEASABLE.includes(m.status) || action.busy}
          onClick={() => release(m)}
        >
          Release
        </button>
        <button
          type="button"
          disabled={!CANCELLABLE.includes(m.status) || action.busy}
          onClick={async () =>
            (await askConfirm({
              title: 'Cancel this message?',
              body: <p>It will not be sent.</p>,
              confirm: 'Cancel the message',
              cancel: 'Keep it',
              danger: true,
            })) && act('cancel')
          }
        >
          Cancel
        </button>
        <button type="button" disabled={!retryable || action.busy} onClick={() => act('retry')}>
          Retry now
        </button>
        <a
          class="button"
          href={`${API_BASE}/messages/${encodeURIComponent(id)}/raw`}
          download={`${id}.eml`}
        >
          Download .eml
        </a>
        {m.status === 'captured' && (
          <button type="button" class="danger" disabled={action.busy} onClick={() => remove(m)}>
            Delete
          </button>
        )}
        <span class="share">
          <label>
            <span class="visually-hidden">Link expiry</span>
            <select
              value={expiry}
              onChange={(e) => setExpiry(e.currentTarget.value)}
              aria-label="Link expiry"
            >
              <option value="3600">1 hour</option>
              <option value="86400">1 day</option>
              <option value="604800">7 days</option>
              <option value="2592000">30 days</option>
            </select>
          </label>
          <button
            type="button"
            disabled={action.busy}
            onClick={async () => {
              const made = await action.run(() =>
                post<Api.ViewerLink>(`/messages/${encodeURIComponent(id)}/link`, {
                  expires_in_seconds: Number(expiry),
                }),
              );
              setLink(made ?? null);
              if (made) links.reload();
            }}
          >
            Share
          </button>
        </span>
      </div>
      <ErrorNote error={action.error} />
      {done && (
        <p class="note action-done" role="status">
          {done}
        </p>
      )}
      {link && (
        <div class="note share-link" role="status">
          Public link (anyone with it can read this message until <Time iso={link.expires_at} />
          ):{' '}
          <a href={link.url} target="_blank" rel="noopener noreferrer" class="break">
            {link.url}
          </a>{' '}
          <CopyButton text={link.url} />
        </div>
      )}
      <LiveLinks
        id={id}
        links={links.data?.links ?? []}
        onRevoked={(revoked) => {
          if (link?.id === revoked) setLink(null);
          links.reload();
        }}
      />
      <dl class="facts">
        <dt>From</dt>
        <dd>{m.from_name ? `${m.from_name} <${m.from}>` : m.from}</dd>
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
      <Tabs tab={tab} onTab={setTab} />
      <div
        class="tab-panel"
        role="tabpanel"
        id={`panel-${tab}`}
        aria-labelledby={`tab-${tab}`}
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a tab panel takes focus (WAI-ARIA tabs pattern), and scrolls
        tabIndex={0}
      >
        {tab === 'Preview' && <Preview id={id} content={content.data} error={content.error} />}
        {tab === 'Text' && (
          <pre class="text-body">
            {content.data ? (content.data.text ?? '(no text part)') : 'Loading…'}
          </pre>
        )}
        {tab === 'Headers' && <Headers content={content.data} />}
        {tab === 'Attachments' && <Attachments id={id} content={content.data} />}
        {tab === 'Timeline' && <Timeline entries={m.timeline} />}
        {tab === 'Recipients' && <Recipients list={m.recipients} />}
        {tab === 'Details' && <Details m={m} />}
      </div>
    </section>
  );
}

/**
 * The parts' tabs (WAI-ARIA tabs pattern): one tab stop, the selected tab; arrow keys move to
 * the previous or next tab (wrapping), Home and End to the first and last, and select it.
 */
function Tabs({ tab, onTab }: { tab: Tab; onTab: (t: Tab) => void }) {
  const list = useRef<HTMLDivElement>(null);
  const go = (t: Tab) => {
    onTab(t);
    list.current?.querySelector<HTMLButtonElement>(`#tab-${t}`)?.focus();
  };
  return (
    <div
      class="tabs"
      role="tablist"
      aria-label="Message parts"
      ref={list}
      onKeyDown={(e) => {
        const i = TABS.indexOf(tab);
        const next =
          e.key === 'ArrowRight'
            ? TABS[(i + 1) % TABS.length]
            : e.key === 'ArrowLeft'
              ? TABS[(i - 1 + TABS.length) % TABS.length]
              : e.key === 'Home'
                ? TABS[0]
                : e.key === 'End'
                  ? TABS[TABS.length - 1]
                  : null;
        if (!next) return;
        e.preventDefault();
        go(next);
      }}
    >
      {TABS.map((t) => (
        <button
          key={t}
          type="button"
          role="tab"
          id={`tab-${t}`}
          aria-selected={tab === t}
          aria-controls={tab === t ? `panel-${t}` : undefined}
          tabIndex={tab === t ? 0 : -1}
          class={tab === t ? 'tab active' : 'tab'}
          onClick={() => onTab(t)}
        >
          {t}
        </button>
      ))}
    </div>
  );
}

/** The message's public links that still open it, each revocable (asked first): revoked, it answers as a forged one. */
function LiveLinks({
  id,
  links,
  onRevoked,
}: {
  id: string;
  links: Api.ViewerLinkRecord[];
  onRevoked: (linkId: string) => void;
}) {
  const action = useAction();
  const [done, setDone] = useState<string | null>(null);
  if (links.length === 0 && !done) return null;
  return (
    <section class="live-links" aria-labelledby="live-links-title">
      <h2 id="live-links-title">Public links</h2>
      {links.length === 0 ? (
        <p class="muted">No public link opens this message now.</p>
      ) : (
        <ul>
          {links.map((l) => (
            <li key={l.id} data-link={l.id}>
              <code>{l.id}</code> by {l.created_by_email ?? l.created_by}, made{' '}
              <Time iso={l.created_at} />, opens until <Time iso={l.expires_at} />{' '}
              <button
                type="button"
                class="small danger"
                disabled={action.busy}
                onClick={async () => {
                  const ok = await askConfirm({
                    title: 'Revoke this public link?',
                    body: (
                      <p>
                        Whoever has it can no longer read the message: the link answers "Not found",
                        as one that never existed.
                      </p>
                    ),
                    confirm: 'Revoke the link',
                    cancel: 'Keep it',
                    danger: true,
                  });
                  if (!ok) return;
                  setDone(null);
                  if (
                    await action.run(() =>
                      api('DELETE', `/messages/${encodeURIComponent(id)}/links/${l.id}`),
                    )
                  ) {
                    setDone(`Link ${l.id} revoked: it no longer opens the message.`);
                    onRevoked(l.id);
                  }
                }}
              >
                Revoke
              </button>
            </li>
          ))}
        </ul>
      )}
      <ErrorNote error={action.error} />
      {done && (
        <p class="note" role="status">
          {done}
        </p>
      )}
    </section>
  );
}

function Preview({
  id,
  content,
  error,
}: {
  id: string;
  content: Api.MessageContent | undefined;
  error: unknown;
}) {
  const [images, setImages] = useState(false);
  if (error) return <ErrorNote error={error} />;
  if (!content) return <Loading what="the message body" />;
  if (content.html === null && content.text === null)
    return <p class="muted">This message has no body.</p>;
  return (
    <>
      <p class="muted">
        {images
          ? 'Remote images are shown.'
          : 'Remote images are blocked (images sent with the message show).'}{' '}
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
          <a
            href={`${API_BASE}/messages/${encodeURIComponent(id)}/attachments/${a.index}`}
            download={a.filename ?? `attachment-${a.index}`}
          >
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
              <strong>hand-off to {e.provider ?? 'provider'}</strong>: {e.outcome} in{' '}
              {e.duration_ms} ms
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
        {m.provider ?? '—'}{' '}
        {m.provider_message_id && <span class="muted">({m.provider_message_id})</span>}
      </dd>
      <dt>Size</dt>
      <dd>{m.size_bytes === undefined ? '—' : bytes(m.size_bytes)}</dd>
      <dt>Idempotency key</dt>
      <dd>{m.idempotency_key ?? '—'}</dd>
      <dt>Updated</dt>
      <dd>
        <Time iso={m.updated_at} />
      </dd>
    </dl>
  );
}
