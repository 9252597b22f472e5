/**
 * The message list (all messages with filters) and, with `inboxProject`, one project's sandbox
 * inbox. Newest first, with how many match; cursor pages whose cursor is in the address (Back
 * returns to the page); live updates; bulk release / cancel / retry now. A queued message that
 * already failed an attempt shows as retrying, with its attempts and last error. On a phone
 * each message is a stacked row (subject, to, status, time) and the filters fold away.
 * Live updates never move what is on screen: a changed row changes in place; messages that are
 * new to the list (or changed into its status filter), and those a bulk action elsewhere
 * changed, are counted in the live bar (always the same height; each message once) and shown
 * when asked, unless the list was empty. The bar says "up to date" only while the stream is
 * open. A bulk action asks first, naming how many messages it will touch (counted by the
 * server, a dry run), then changes the rows on screen in place and says what it did.
 */
import { memo } from 'preact/compat';
import { useEffect, useRef, useState } from 'preact/hooks';
import { type Api, doors, get, post, query } from '../api';
import { askConfirm } from '../confirm';
import { type BulkChange, type MessageChange, useLiveMessages, useLiveState } from '../live';
import { href, navigate, type Route } from '../router';
import { useApp } from '../session';
import {
  Empty,
  ErrorNote,
  Field,
  Loading,
  SandboxMarker,
  StatusBadge,
  Table,
  Time,
  useAction,
  useLoad,
} from '../ui';

const STATUSES: Api.MessageStatus[] = [
  'queued',
  'scheduled',
  'paused',
  'captured',
  'sending',
  'sent',
  'delivered',
  'bounced',
  'complained',
  'failed',
  'cancelled',
  'suppressed',
];
const FILTER_KEYS = [
  'project',
  'environment',
  'status',
  'from',
  'to',
  'subject',
  'category',
  'tag',
  'id',
  'created_after',
  'created_before',
] as const;
type Filter = Partial<Record<(typeof FILTER_KEYS)[number], string>>;
type BulkAction = 'release' | 'cancel' | 'retry';

/** The states each action applies to (the server's rule, for the rows on screen). */
const ACTION_FROM: Record<BulkAction, string[]> = {
  release: ['paused', 'captured'],
  cancel: ['queued', 'scheduled', 'paused', 'captured'],
  retry: ['queued'],
};
const VERB: Record<BulkAction, string> = {
  release: 'Release',
  cancel: 'Cancel',
  retry: 'Retry now',
};

const plural = (n: number, one: string, many = `${one}s`) =>
  `${n.toLocaleString()} ${n === 1 ? one : many}`;

/** The list's address: its filter, and (past the first page) the cursor and page number. */
function listHref(base: string, filter: Filter, page?: { cursor: string; number: number }): string {
  return href(base, {
    ...filter,
    ...(page ? { cursor: page.cursor, page: String(page.number) } : {}),
  });
}

/** A queued message that already failed an attempt: waiting on the retry ladder, not fresh. */
const retrying = (m: Api.MessageSummary) => m.status === 'queued' && m.attempts > 0;

/** The From as the message gave it: "Shop <shop@example.com>", or the address alone. */
const fromText = (m: Api.MessageSummary) => (m.from_name ? `${m.from_name} <${m.from}>` : m.from);

function filterOf(route: Route, inboxProject?: string): Filter {
  const f: Filter = {};
  for (const k of FILTER_KEYS) {
    const v = route.params.get(k);
    if (v) f[k] = v;
  }
  if (inboxProject) Object.assign(f, { project: inboxProject, environment: 'sandbox' });
  return f;
}

const TEXT_FILTERS: {
  name: (typeof FILTER_KEYS)[number];
  label: string;
  type?: string;
  placeholder?: string;
}[] = [
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

/** The status a row shows once `action` changed it (the server's transitions). */
function statusAfter(action: BulkAction, m: Api.MessageSummary): Api.MessageStatus {
  if (action === 'cancel') return 'cancelled';
  if (action === 'release')
    return m.scheduled_at && Date.parse(m.scheduled_at) > Date.now() ? 'scheduled' : 'queued';
  return m.status;
}

/** What a bulk action did, in words. */
function bulkDoneText(r: Api.BulkResult): string {
  const n = plural(r.changed, 'message');
  const said =
    r.action === 'release'
      ? `Released ${n}: queued for delivery.`
      : r.action === 'cancel'
        ? `Cancelled ${n}: they will not be sent.`
        : `Retry now: ${n} ${r.changed === 1 ? 'is' : 'are'} due at once.`;
  const meanwhile =
    r.matched > r.changed
      ? ` ${plural(r.matched - r.changed, 'message')} changed meanwhile and ${r.matched - r.changed === 1 ? 'was' : 'were'} left as ${r.matched - r.changed === 1 ? 'it was' : 'they were'}.`
      : '';
  const skipped =
    r.skipped > 0
      ? ` ${plural(r.skipped, 'selected message')} ${r.skipped === 1 ? 'was' : 'were'} not in a state this applies to.`
      : '';
  const gone =
    r.not_found > 0
      ? ` ${plural(r.not_found, 'message')} no longer ${r.not_found === 1 ? 'exists' : 'exist'}.`
      : '';
  return said + meanwhile + skipped + gone;
}

function CurlHint({ sandbox }: { sandbox: boolean }) {
  const base =
    (sandbox ? doors().sandbox : doors().production) ?? doors().sandbox ?? 'http://127.0.0.1:8081';
  const cmd = `curl -X POST ${base}/v1/send \\\n  -H 'Authorization: Bearer ps_test_…' -H 'Content-Type: application/json' \\\n  -d '{"from":"you@example.com","to":"someone@example.org","subject":"Hello","text":"Hi"}'`;
  return (
    <>
      <p>
        Send one with curl to the sandbox (a test key from this project's API keys page; sandbox
        mail is captured here, never delivered):
      </p>
      <pre class="code">{cmd}</pre>
    </>
  );
}

export function MessagesScreen({ route, inboxProject }: { route: Route; inboxProject?: string }) {
  const app = useApp();
  const filter = filterOf(route, inboxProject);
  const filterKey = JSON.stringify(filter);
  const basePath = inboxProject ? `/projects/${inboxProject}/inbox` : '/messages';
  /** The filter as the address carries it (an inbox's project and environment are its path). */
  const addressFilter: Filter = inboxProject
    ? Object.fromEntries(
        Object.entries(filter).filter(([k]) => k !== 'project' && k !== 'environment'),
      )
    : filter;
  // The page is in the address: Back returns to it, a reload keeps it.
  const cursor = route.params.get('cursor');
  const pageNumber = cursor ? Math.max(2, Number(route.params.get('page')) || 2) : 1;
  const firstPage = () => navigate(listHref(basePath, addressFilter));
  const apiFilter = {
    ...filter,
    status: filter.status?.split(','),
    created_after: instant(filter.created_after),
    created_before: instant(filter.created_before),
  };
  const page = useLoad(
    () =>
      get<Api.MessagePage>(
        `/messages${query({ ...apiFilter, limit: 50, cursor: cursor ?? undefined })}`,
      ),
    [filterKey, cursor],
  );
  // The page as last changed here: several live changes in one tick each build on the one before.
  const shown = useRef(page.data);
  shown.current = page.data;
  const setShown = (data: Api.MessagePage) => {
    shown.current = data;
    page.setData(data);
  };
  const [selected, setSelected] = useState<Set<string>>(new Set());
  /** Messages new to the list (or changed into its status filter) since it was read: each once. */
  const [fresh, setFresh] = useState<Set<string>>(new Set());
  /** Messages changed by bulk actions elsewhere (the stream gives their count, not their ids). */
  const [elsewhere, setElsewhere] = useState(0);
  const [highlight, setHighlight] = useState<Set<string>>(new Set());
  const bulk = useAction();
  const [bulkNote, setBulkNote] = useState<string | null>(null);
  const liveState = useLiveState();
  /** This page's own bulk actions: their `refresh` event is not news here (the rows changed in place). */
  const ownActions = useRef<{ action: string; count: number; at: number }[]>([]);
  const inFlight = useRef<BulkChange[] | null>(null);

  const statusFilter = filter.status?.split(',');
  const belongs = (c: MessageChange) =>
    statusFilter ? statusFilter.includes(c.status) : c.type === 'mail.accepted';
  const countElsewhere = (r: BulkChange) => {
    const now = Date.now();
    ownActions.current = ownActions.current.filter((o) => now - o.at < 60_000);
    const mine = ownActions.current.findIndex((o) => o.action === r.action && o.count === r.count);
    if (mine >= 0) ownActions.current.splice(mine, 1);
    else setElsewhere((n) => n + r.count);
  };

  const showFresh = () => {
    setFresh(new Set());
    setElsewhere(0);
    if (cursor) firstPage();
    else page.reload();
  };
  useLiveMessages(
    { project: filter.project, environment: filter.environment },
    (c: MessageChange) => {
      const data = shown.current;
      if (!data) return;
      const rows = data.messages;
      const i = rows.findIndex((m) => m.id === c.id);
      if (i >= 0) {
        const next = rows.slice();
        next[i] = {
          ...rows[i],
          status: c.status as Api.MessageStatus,
          paused: c.status === 'paused',
        };
        setShown({ ...data, messages: next });
        setHighlight(new Set([c.id]));
      } else if (c.status !== 'deleted' && belongs(c)) {
        // An empty first page has nothing to push aside: show it at once.
        if (rows.length === 0 && !cursor) {
          setHighlight(new Set([c.id]));
          page.reload();
        } else setFresh((ids) => (ids.has(c.id) ? ids : new Set(ids).add(c.id)));
      }
    },
    (r) => (inFlight.current ? inFlight.current.push(r) : countElsewhere(r)),
  );

  const rows = page.data?.messages ?? [];
  const waiting = [...fresh].filter((id) => !rows.some((m) => m.id === id)).length + elsewhere;
  const allSelected = rows.length > 0 && rows.every((m) => selected.has(m.id));
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  const runBulk = async (action: BulkAction, byFilter: boolean) => {
    setBulkNote(null);
    const target = byFilter ? { filter: apiFilter } : { ids: [...selected] };
    const dry = await bulk.run(() =>
      post<Api.BulkResult>('/messages/bulk', { action, ...target, dry_run: true }),
    );
    if (!dry) return;
    const verb = VERB[action].toLowerCase();
    if (dry.matched === 0) {
      setBulkNote(
        byFilter
          ? `No message matching the filter can be ${action === 'retry' ? 'retried now' : `${verb}ed`}: ${action === 'release' ? 'only paused or captured messages can be released' : action === 'cancel' ? 'only messages not yet handed off can be cancelled' : 'only queued messages waiting for their next attempt can be retried'}.`
          : `None of the selected messages can be ${action === 'retry' ? 'retried now' : action === 'cancel' ? 'cancelled' : 'released'}.`,
      );
      return;
    }
    const count = plural(dry.matched, 'message');
    const one =
      !byFilter && dry.matched === 1
        ? rows.find((m) => selected.has(m.id) && ACTION_FROM[action].includes(m.status))
        : undefined;
    const sandbox =
      inboxProject !== undefined ||
      filter.environment === 'sandbox' ||
      rows.some((m) => m.sandbox && (byFilter || selected.has(m.id)));
    const ok = await askConfirm({
      title: `${VERB[action]} ${count}${byFilter ? ' matching the filter' : ''}?`,
      body: (
        <>
          <p>
            {action === 'release'
              ? one
                ? `It is delivered to ${one.to.join(', ')}, through the project's providers.`
                : "They are delivered to their recipients, through their projects' providers."
              : action === 'cancel'
                ? 'They will not be sent. This cannot be undone.'
                : 'Each is tried again at once instead of waiting for its next attempt.'}
          </p>
          {action === 'release' && sandbox && (
            <p>
              Sandbox messages were never delivered: released, they go to their real recipients.
            </p>
          )}
          {dry.skipped > 0 && (
            <p class="muted">
              {plural(dry.skipped, 'selected message')} not in a state this applies to stay as they
              are.
            </p>
          )}
        </>
      ),
      confirm: `${VERB[action]} ${count}`,
      cancel: 'Leave them as they are',
      danger: action === 'cancel',
    });
    if (!ok) return;
    inFlight.current = [];
    const result = await bulk.run(() =>
      post<Api.BulkResult>('/messages/bulk', { action, ...target }),
    );
    const arrived = inFlight.current;
    inFlight.current = null;
    if (result && result.changed > 0)
      ownActions.current.push({ action, count: result.changed, at: Date.now() });
    arrived.forEach(countElsewhere);
    if (!result) return;
    // The rows on screen it changed change in place (no other message comes or goes).
    const changed = result.changed_ids ? new Set(result.changed_ids) : null;
    const data = shown.current;
    if (data && result.changed > 0) {
      const touched = (m: Api.MessageSummary) =>
        changed ? changed.has(m.id) : ACTION_FROM[action].includes(m.status);
      setShown({
        ...data,
        messages: data.messages.map((m) =>
          touched(m)
            ? {
                ...m,
                status: statusAfter(action, m),
                paused: action === 'release' ? false : m.paused,
              }
            : m,
        ),
      });
      setHighlight(new Set(data.messages.filter(touched).map((m) => m.id)));
    }
    setBulkNote(bulkDoneText(result));
    setSelected(new Set());
    setMatching(null);
    if (matchingOpen.current) void countMatching();
  };

  /** How many messages each "all matching" action would touch (the server's dry runs), while that menu is open. */
  const [matching, setMatching] = useState<Record<BulkAction, number> | null>(null);
  const matchingOpen = useRef(false);
  const countMatching = async () => {
    const counts = await Promise.all(
      (['release', 'cancel', 'retry'] as const).map((a) =>
        post<Api.BulkResult>('/messages/bulk', {
          action: a,
          filter: apiFilter,
          dry_run: true,
        }).then(
          (r) => [a, r.matched] as const,
          () => [a, -1] as const,
        ),
      ),
    );
    if (matchingOpen.current) setMatching(Object.fromEntries(counts) as Record<BulkAction, number>);
  };
  useEffect(() => {
    setMatching(null);
    if (matchingOpen.current) void countMatching();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [filterKey]);

  const title = inboxProject
    ? `Sandbox inbox — ${app.projects.find((p) => p.id === inboxProject)?.name ?? inboxProject}`
    : 'Messages';
  const filtered = Object.keys(filter).some(
    (k) => !inboxProject || !['project', 'environment'].includes(k),
  );
  return (
    <section>
      <h1>{title}</h1>
      {!inboxProject && <Filters key={filterKey} filter={filter} projects={app.projects} />}
      {page.data && (
        <p class="result-count" aria-live="polite">
          {page.data.total_capped
            ? `More than ${page.data.total.toLocaleString()} messages`
            : plural(page.data.total, 'message')}
          {filtered
            ? page.data.total === 1 && !page.data.total_capped
              ? ' matches this filter'
              : ' match this filter'
            : ''}
        </p>
      )}
      <div class="live-bar" aria-live="polite">
        <span class={`live-dot${liveState === 'live' ? '' : ' off'}`} aria-hidden="true" />{' '}
        {liveState === 'live' ? 'Live' : 'Not live'}
        {liveState !== 'live' ? (
          <span class="muted">
            {' '}
            ·{' '}
            {liveState === 'connecting'
              ? 'connecting…'
              : 'reconnecting: changes are not shown until then'}
          </span>
        ) : waiting > 0 ? (
          <button type="button" class="link" onClick={showFresh}>
            {plural(waiting, 'new or changed message')} — show
          </button>
        ) : (
          <span class="muted"> · up to date</span>
        )}
      </div>
      <div class="bulk-bar">
        <span class="muted">{selected.size} selected</span>
        {(['release', 'cancel', 'retry'] as const).map((a) => (
          <button
            key={a}
            type="button"
            disabled={selected.size === 0 || bulk.busy}
            onClick={() => runBulk(a, false)}
          >
            {VERB[a]}
          </button>
        ))}
        {filtered && (
          <details
            class="inline"
            onToggle={(e) => {
              matchingOpen.current = e.currentTarget.open;
              if (matchingOpen.current) void countMatching();
            }}
          >
            <summary>All matching the filter…</summary>
            {(['release', 'cancel', 'retry'] as const).map((a) => {
              const n = matching?.[a];
              return (
                <button
                  key={a}
                  type="button"
                  disabled={bulk.busy || n === undefined || n === 0}
                  onClick={() => runBulk(a, true)}
                >
                  {VERB[a]} all {n === undefined || n < 0 ? '…' : n.toLocaleString()} matching
                </button>
              );
            })}
          </details>
        )}
      </div>
      <ErrorNote error={bulk.error} />
      {bulkNote && (
        <p class="note bulk-done" role="status">
          {bulkNote}
        </p>
      )}
      <ErrorNote error={page.error} />
      {!page.data && !page.error && <Loading what="messages" />}
      {page.data && rows.length === 0 && (
        <Empty
          title={
            filtered
              ? 'No messages match this filter.'
              : inboxProject
                ? 'No sandbox messages yet.'
                : 'No messages yet.'
          }
        >
          {filtered ? (
            <p>
              <a href={href(basePath)}>Clear the filter</a>
            </p>
          ) : cursor ? (
            <p>
              <a href={listHref(basePath, addressFilter)}>Back to the newest</a>
            </p>
          ) : (
            <CurlHint sandbox />
          )}
        </Empty>
      )}
      {rows.length > 0 && (
        <Table label="Messages">
          <thead>
            <tr>
              <th class="check">
                <input
                  type="checkbox"
                  aria-label="Select all on this page"
                  checked={allSelected}
                  onChange={() =>
                    setSelected(allSelected ? new Set() : new Set(rows.map((m) => m.id)))
                  }
                />
              </th>
              <th class="c-time">Created</th>
              <th class="c-status">Status</th>
              <th class="c-from">From</th>
              <th class="c-to">To</th>
              <th class="c-subject">Subject</th>
            </tr>
          </thead>
          <tbody class="message-rows">
            {rows.map((m) => (
              <tr key={m.id} class={highlight.has(m.id) ? 'flash' : ''} data-id={m.id}>
                <td class="check">
                  <input
                    type="checkbox"
                    aria-label={`Select ${m.subject || m.id}`}
                    checked={selected.has(m.id)}
                    onChange={() => toggle(m.id)}
                  />
                </td>
                <td class="nowrap c-time">
                  <Time iso={m.created_at} />
                </td>
                <td class="nowrap status-cell c-status">
                  {retrying(m) ? (
                    <>
                      <span
                        class="badge status-retrying"
                        title={
                          m.next_attempt_at
                            ? `next attempt ${new Date(m.next_attempt_at).toLocaleString()}`
                            : undefined
                        }
                      >
                        retrying
                      </span>{' '}
                      <span class="retry-note" title={m.last_error ?? undefined}>
                        {plural(m.attempts, 'attempt')}
                        {m.last_error ? `: ${m.last_error}` : ''}
                      </span>
                    </>
                  ) : (
                    <StatusBadge status={m.status} />
                  )}
                  {m.sandbox && <SandboxMarker />}
                </td>
                <td class="ellipsis c-from">{fromText(m)}</td>
                <td class="ellipsis c-to">{m.to.join(', ')}</td>
                <td class="ellipsis c-subject">
                  <a href={href(`/messages/${m.id}`)}>{m.subject || '(no subject)'}</a>
                </td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      {(cursor || page.data?.next_cursor) && (
        <nav class="pager" aria-label="Pages">
          <button type="button" disabled={!cursor} onClick={firstPage}>
            ← Newest
          </button>
          <span class="muted">Page {pageNumber}</span>
          <button
            type="button"
            disabled={!page.data?.next_cursor}
            onClick={() =>
              page.data?.next_cursor &&
              navigate(
                listHref(basePath, addressFilter, {
                  cursor: page.data.next_cursor,
                  number: pageNumber + 1,
                }),
              )
            }
          >
            Older →
          </button>
        </nav>
      )}
    </section>
  );
}

/** Phone width (as styles.css): the filters start folded. */
const narrow = () => typeof matchMedia === 'function' && matchMedia('(max-width: 760px)').matches;

/**
 * The filter form, drawn once per filter (keyed by it): what is typed or ticked stays while live
 * updates redraw the list, until it is searched.
 */
const Filters = memo(FilterForm, (a, b) => a.projects === b.projects);

function FilterForm({ filter, projects }: { filter: Filter; projects: Api.Project[] }) {
  const [startOpen] = useState(() => !narrow());
  const statuses = filter.status?.split(',') ?? [];
  const set = Object.keys(filter).length;
  return (
    <details class="filter-box" open={startOpen}>
      <summary>Filters{set > 0 ? ` (${set} set)` : ''}</summary>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          const v: Record<string, string> = {};
          const data = new FormData(e.currentTarget);
          data.forEach((value, k) => {
            if (k !== 'status' && typeof value === 'string' && value.trim()) v[k] = value.trim();
          });
          const picked = data.getAll('status').filter((s): s is string => typeof s === 'string');
          if (picked.length > 0) v.status = picked.join(',');
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
        <fieldset class="status-pick">
          <legend class="field-label">Status</legend>
          <details>
            <summary>{statuses.length === 0 ? 'Any' : statuses.join(', ')}</summary>
            <div class="status-options">
              {STATUSES.map((s) => (
                <label key={s} class="check-label">
                  <input type="checkbox" name="status" value={s} checked={statuses.includes(s)} />{' '}
                  {s}
                </label>
              ))}
            </div>
          </details>
        </fieldset>
        {TEXT_FILTERS.map((f) => (
          <Field key={f.name} label={f.label}>
            <input
              name={f.name}
              type={f.type ?? 'text'}
              value={filter[f.name] ?? ''}
              placeholder={f.placeholder}
            />
          </Field>
        ))}
        <div class="filter-actions">
          <button type="submit" class="primary">
            Search
          </button>
          <a href={href('/messages')}>Clear</a>
        </div>
      </form>
    </details>
  );
}
