/**
 * The message list (all messages with filters) and, with `inboxProject`, one project's sandbox
 * inbox. Newest first, cursor pages, live updates, bulk release / cancel / retry now.
 * Live updates never move what is on screen: a changed row changes in place; new messages are
 * counted in the live bar (always the same height) and shown when asked, unless the list was
 * empty.
 */
import { useState } from 'preact/hooks';
import { doors, get, post, query, type Api } from '../api';
import { useLiveMessages, type MessageChange } from '../live';
import { href, navigate, type Route } from '../router';
import { useApp } from '../session';
import { Empty, ErrorNote, Field, Loading, SandboxMarker, StatusBadge, Table, Time, useAction, useCursorPages, useLoad } from '../ui';

const STATUSES: Api.MessageStatus[] = ['queued', 'scheduled', 'paused', 'captured', 'sending', 'sent', 'delivered', 'bounced', 'complained', 'failed', 'cancelled', 'suppressed'];
const FILTER_KEYS = ['project', 'environment', 'status', 'from', 'to', 'subject', 'category', 'tag', 'id', 'created_after', 'created_before'] as const;
type Filter = Partial<Record<(typeof FILTER_KEYS)[number], string>>;

function filterOf(route: Route, inboxProject?: string): Filter {
  const f: Filter = {};
  for (const k of FILTER_KEYS) {
    const v = route.params.get(k);
    if (v) f[k] = v;
  }
  if (inboxProject) Object.assign(f, { project: inboxProject, environment: 'sandbox' });
  return f;
}

const TEXT_FILTERS: { name: (typeof FILTER_KEYS)[number]; label: string; type?: string; placeholder?: string }[] = [
  { name: 'from', label: 'From' },
  { name: 'to', label: 'To' },
  { name: 'subject', label: 'Subject contains' },
  { name: 'category', label: 'Category' },
  { name: 'tag', label: 'Tag' },
  { name: 'id', label: 'Message id', placeholder: 'm.…' },
  { name: 'created_after', label: 'Created after', type: 'datetime-local' },
  { name: 'created_before', label: 'Created before', type: 'datetime-local' },
];

/** `datetime-local` values are the browser's local time; the API takes an instant. */
const instant = (local?: string) => (local ? new Date(local).toISOString() : undefined);

function CurlHint({ sandbox }: { sandbox: boolean }) {
  const base = (sandbox ? doors().sandbox : doors().production) ?? doors().sandbox ?? 'http://127.0.0.1:8081';
  const cmd = `curl -X POST ${base}/v1/send \\\n  -H 'Authorization: Bearer ps_test_…' -H 'Content-Type: application/json' \\\n  -d '{"from":"you@example.com","to":"someone@example.org","subject":"Hello","text":"Hi"}'`;
  return (
    <>
      <p>Send one with curl to the sandbox (a test key from this project's API keys page; sandbox mail is captured here, never delivered):</p>
      <pre class="code">{cmd}</pre>
    </>
  );
}

export function MessagesScreen({ route, inboxProject }: { route: Route; inboxProject?: string }) {
  const app = useApp();
  const filter = filterOf(route, inboxProject);
  const filterKey = JSON.stringify(filter);
  const pages = useCursorPages();
  const [pageKey, setPageKey] = useState(filterKey);
  if (pageKey !== filterKey) {
    setPageKey(filterKey);
    pages.first();
  }
  const cursor = pages.cursor;
  const page = useLoad(
    () =>
      get<Api.MessagePage>(
        `/messages${query({
          ...filter,
          status: filter.status?.split(','),
          created_after: instant(filter.created_after),
          created_before: instant(filter.created_before),
          limit: 50,
          cursor: cursor ?? undefined,
        })}`,
      ),
    [filterKey, cursor],
  );
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [fresh, setFresh] = useState(0);
  const [highlight, setHighlight] = useState<Set<string>>(new Set());
  const bulk = useAction();
  const [bulkResult, setBulkResult] = useState<Api.BulkResult | null>(null);

  const showFresh = () => {
    setFresh(0);
    pages.first();
    page.reload();
  };
  useLiveMessages(
    { project: filter.project, environment: filter.environment },
    (c: MessageChange) => {
      const rows = page.data?.messages;
      if (!rows) return;
      const i = rows.findIndex((m) => m.id === c.id);
      if (i >= 0) {
        if (c.status === 'deleted') return setFresh((n) => n + 1);
        const next = rows.slice();
        next[i] = { ...rows[i], status: c.status as Api.MessageStatus, paused: c.status === 'paused' };
        page.setData({ ...page.data!, messages: next });
        setHighlight(new Set([c.id]));
      } else if (c.type === 'mail.accepted' || c.status === 'captured' || c.status === 'queued' || c.status === 'scheduled' || c.status === 'paused') {
        // An empty first page has nothing to push aside: show it at once.
        if (rows.length === 0 && pages.onFirstPage) {
          setHighlight(new Set([c.id]));
          page.reload();
        } else setFresh((n) => n + 1);
      }
    },
    () => setFresh((n) => Math.max(n, 1)),
  );

  const rows = page.data?.messages ?? [];
  const allSelected = rows.length > 0 && rows.every((m) => selected.has(m.id));
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  const runBulk = async (action: 'release' | 'cancel' | 'retry', byFilter: boolean) => {
    const body = byFilter
      ? { action, filter: { ...filter, status: filter.status?.split(','), created_after: instant(filter.created_after), created_before: instant(filter.created_before) } }
      : { action, ids: [...selected] };
    const result = await bulk.run(() => post<Api.BulkResult>('/messages/bulk', body));
    if (result) {
      setBulkResult(result);
      setSelected(new Set());
      page.reload();
    }
  };

  const title = inboxProject ? `Sandbox inbox — ${app.projects.find((p) => p.id === inboxProject)?.name ?? inboxProject}` : 'Messages';
  const filtered = Object.keys(filter).some((k) => !inboxProject || !['project', 'environment'].includes(k));
  return (
    <section>
      <h1>{title}</h1>
      {!inboxProject && <Filters filter={filter} projects={app.projects} />}
      <div class="live-bar" aria-live="polite">
        <span class="live-dot" aria-hidden="true" /> Live
        {fresh > 0 ? (
          <button type="button" class="link" onClick={showFresh}>
            {fresh} new or changed message{fresh === 1 ? '' : 's'} — show
          </button>
        ) : (
          <span class="muted"> · up to date</span>
        )}
      </div>
      <div class="bulk-bar">
        <span class="muted">{selected.size} selected</span>
        {(['release', 'cancel', 'retry'] as const).map((a) => (
          <button key={a} type="button" disabled={selected.size === 0 || bulk.busy} onClick={() => runBulk(a, false)}>
            {a === 'retry' ? 'Retry now' : a[0].toUpperCase() + a.slice(1)}
          </button>
        ))}
        {filtered && (
          <details class="inline">
            <summary>All matching the filter…</summary>
            {(['release', 'cancel', 'retry'] as const).map((a) => (
              <button key={a} type="button" disabled={bulk.busy} onClick={() => confirm(`${a} every message matching the filter?`) && runBulk(a, true)}>
                {a === 'retry' ? 'Retry now' : a[0].toUpperCase() + a.slice(1)} all matching
              </button>
            ))}
          </details>
        )}
      </div>
      <ErrorNote error={bulk.error} />
      {bulkResult && (
        <p class="note" role="status">
          {bulkResult.action}: {bulkResult.changed} changed, {bulkResult.skipped} skipped{bulkResult.not_found ? `, ${bulkResult.not_found} not found` : ''}.
        </p>
      )}
      <ErrorNote error={page.error} />
      {!page.data && !page.error && <Loading what="messages" />}
      {page.data && rows.length === 0 && (
        <Empty title={filtered ? 'No messages match this filter.' : inboxProject ? 'No sandbox messages yet.' : 'No messages yet.'}>
          {filtered ? <p><a href={inboxProject ? href(`/projects/${inboxProject}/inbox`) : href('/messages')}>Clear the filter</a></p> : <CurlHint sandbox />}
        </Empty>
      )}
      {rows.length > 0 && (
        <Table label="Messages">
          <thead>
            <tr>
              <th class="check">
                <input type="checkbox" aria-label="Select all on this page" checked={allSelected} onChange={() => setSelected(allSelected ? new Set() : new Set(rows.map((m) => m.id)))} />
              </th>
              <th>Created</th>
              <th>Status</th>
              <th class="narrow-hide">From</th>
              <th>To</th>
              <th>Subject</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((m) => (
              <tr key={m.id} class={highlight.has(m.id) ? 'flash' : ''} data-id={m.id}>
                <td class="check">
                  <input type="checkbox" aria-label={`Select ${m.subject || m.id}`} checked={selected.has(m.id)} onChange={() => toggle(m.id)} />
                </td>
                <td class="nowrap">
                  <Time iso={m.created_at} />
                </td>
                <td class="nowrap status-cell">
                  <StatusBadge status={m.status} />
                  {m.sandbox && <SandboxMarker />}
                </td>
                <td class="narrow-hide ellipsis">{m.from}</td>
                <td class="ellipsis">{m.to.join(', ')}</td>
                <td class="ellipsis">
                  <a href={href(`/messages/${m.id}`)}>{m.subject || '(no subject)'}</a>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      {pages.pager(page.data?.next_cursor)}
    </section>
  );
}

function Filters({ filter, projects }: { filter: Filter; projects: Api.Project[] }) {
  return (
    <form
      class="filters"
      onSubmit={(e) => {
        e.preventDefault();
        const v: Record<string, string> = {};
        new FormData(e.currentTarget).forEach((value, k) => {
          if (typeof value === 'string' && value.trim()) v[k] = value.trim();
        });
        navigate(href('/messages', v));
      }}
    >
      <Field label="Project">
        <select name="project" value={filter.project ?? ''}>
          <option value="">All</option>
          {projects.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Environment">
        <select name="environment" value={filter.environment ?? ''}>
          <option value="">Both</option>
          <option value="production">Production</option>
          <option value="sandbox">Sandbox</option>
        </select>
      </Field>
      <Field label="Status">
        <select name="status" value={filter.status ?? ''}>
          <option value="">Any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </Field>
      {TEXT_FILTERS.map((f) => (
        <Field key={f.name} label={f.label}>
          <input name={f.name} type={f.type ?? 'text'} value={filter[f.name] ?? ''} placeholder={f.placeholder} />
        </Field>
      ))}
      <div class="filter-actions">
        <button type="submit" class="primary">
          Search
        </button>
        <a href={href('/messages')}>Clear</a>
      </div>
    </form>
  );
}
