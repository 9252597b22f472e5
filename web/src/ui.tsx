/** Small shared pieces: loading, errors, empty states, times, copy buttons, pagers, badges. */
import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, handledElsewhere } from './api';
import { whenReconnected } from './connection';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
  setData(data: T): void;
}

/**
 * Runs `load` when `deps` change (and on reload, and when the server answers again after an
 * outage or a new sign-in: what is shown may have changed meanwhile); the last answer wins.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const latest = useRef(0);
  useEffect(() => whenReconnected(() => setTick((t) => t + 1)), []);
  useEffect(() => {
    const n = ++latest.current;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => n === latest.current && setState({ data, loading: false }),
      (error: unknown) =>
        n === latest.current && setState((s) => ({ data: s.data, error, loading: false })),
    );
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return {
    data: state.data,
    error: state.error,
    loading: state.loading,
    reload: useCallback(() => setTick((t) => t + 1), []),
    setData: useCallback((data: T) => setState({ data, loading: false }), []),
  };
}

/** An action button's state: busy while it runs, the API's error message if it fails. */
export function useAction(): {
  busy: boolean;
  error: unknown;
  run: <T>(fn: () => Promise<T>) => Promise<T | undefined>;
  clear(): void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = useCallback(async <T,>(fn: () => Promise<T>) => {
    setBusy(true);
    setError(null);
    try {
      return await fn();
    } catch (err) {
      setError(err);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}

export function errorText(error: unknown): string {
  if (error instanceof ApiError) {
    const fields = error.details.map(
      (d) => `${d.field}: ${d.code.split(':').pop()?.replace(/_/g, ' ')}`,
    );
    return fields.length > 0 && !error.message.includes(fields[0].split(':')[0])
      ? `${error.message} (${fields.join('; ')})`
      : error.message;
  }
  return error instanceof Error ? error.message : String(error);
}

export function ErrorNote({ error }: { error: unknown }) {
  // A session that ended and a password to change are answered by the shell (the sign-in form, the change form).
  if (!error || handledElsewhere(error)) return null;
  return (
    <p class="error" role="alert">
      {errorText(error)}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-live="polite">
      Loading {what}…
    </p>
  );
}

export function Empty({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <p class="empty-title">{title}</p>
      {children}
    </div>
  );
}

const dateTime = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

/** An instant in the browser's time zone; the UTC instant on hover. */
export function Time({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  return (
    <time
      dateTime={iso}
      title={d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC')}
    >
      {dateTime.format(d)}
    </time>
  );
}

/** How long ago an instant was ("12 s ago", "3 min ago"); the UTC instant on hover, like Time. */
export function Ago({ iso, now = Date.now() }: { iso: string | null | undefined; now?: number }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  const seconds = Math.max(0, Math.round((now - d.getTime()) / 1000));
  const text =
    seconds < 90
      ? `${seconds} s ago`
      : seconds < 5400
        ? `${Math.round(seconds / 60)} min ago`
        : seconds < 172_800
          ? `${Math.round(seconds / 3600)} h ago`
          : `${Math.round(seconds / 86_400)} days ago`;
  return (
    <time
      dateTime={iso}
      title={d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC')}
    >
      {text}
    </time>
  );
}

async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  // Plain http on another host: the older way.
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      class="small"
      onClick={async () => {
        await copyText(text).catch(() => undefined);
        setCopied(true);
        setTimeout(() => setCopied(false), 1500);
      }}
    >
      <span class="copy-label">{copied ? 'Copied' : label}</span>
    </button>
  );
}

/** A secret shown once (a new key, a webhook secret, a password): copy it now, it is never shown again. */
export function ShownOnce({
  label,
  value,
  onDone,
}: {
  label: string;
  value: string;
  onDone: () => void;
}) {
  return (
    <div class="shown-once" role="status">
      <p>
        <strong>{label}</strong> — shown only now. Copy it and keep it somewhere safe.
      </p>
      <div class="secret-row">
        <code class="secret" data-testid="secret">
          {value}
        </code>
        <CopyButton text={value} />
      </div>
      <button type="button" onClick={onDone}>
        I have saved it
      </button>
    </div>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{status}</span>;
}

export function SandboxMarker() {
  return (
    <span class="badge sandbox" title="Sandbox: captured, never delivered">
      sandbox
    </span>
  );
}

/** Cursor pagination: first page, and the next one while there is one. */
export function Pager({
  page,
  hasNext,
  onFirst,
  onNext,
}: {
  page: number;
  hasNext: boolean;
  onFirst: () => void;
  onNext: () => void;
}) {
  if (page === 0 && !hasNext) return null;
  return (
    <nav class="pager" aria-label="Pages">
      <button type="button" disabled={page === 0} onClick={onFirst}>
        ← Newest
      </button>
      <span class="muted">Page {page + 1}</span>
      <button type="button" disabled={!hasNext} onClick={onNext}>
        Older →
      </button>
    </nav>
  );
}

/** The page's title (the browser tab, history, a screen reader's first words): "<what> — Postern". */
export function usePageTitle(what: string | null | undefined): void {
  useEffect(() => {
    if (what) document.title = `${what} — Postern`;
  }, [what]);
}

export function UsageBar({
  label,
  used,
  limit,
  format = (n: number) => n.toLocaleString(),
}: {
  label: string;
  used: number;
  limit: number | null;
  format?: (n: number) => string;
}) {
  const pct = limit ? Math.min(100, Math.round((used / limit) * 100)) : 0;
  return (
    <div class="usage">
      <div class="usage-label">
        <span>{label}</span>
        <span class="muted">
          {format(used)} / {limit === null ? 'no limit' : format(limit)}
        </span>
      </div>
      <div
        class="bar"
        role="progressbar"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={pct}
      >
        <div class={`bar-fill${pct >= 90 ? ' high' : ''}`} style={{ width: `${pct}%` }} />
      </div>
    </div>
  );
}

export function Field({
  label,
  children,
  hint,
}: {
  label: string;
  children: ComponentChildren;
  hint?: string;
}) {
  return (
    // biome-ignore lint/a11y/noLabelWithoutControl: the control is the caller's child, inside the label
    <label class="field">
      <span class="field-label">{label}</span>
      {children}
      {hint && <span class="hint">{hint}</span>}
    </label>
  );
}

/** Form values by input name. */
export function formValues(e: JSX.TargetedEvent<HTMLFormElement>): Record<string, string> {
  e.preventDefault();
  const out: Record<string, string> = {};
  new FormData(e.currentTarget).forEach((v, k) => {
    if (typeof v === 'string') out[k] = v.trim();
  });
  return out;
}

/** The values of a form's ticked checkboxes named `name`. */
export function checkedValues(data: FormData, name: string): string[] {
  return data.getAll(name).filter((v): v is string => typeof v === 'string');
}

/** Bytes in human units (binary: 1 KB = 1,024 B), "50 GB", "1.5 MB". */
export function bytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  if (i === 0) return `${n} B`;
  const text = v >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toFixed(1);
  return `${text.replace(/\.0$/, '')} ${units[i]}`;
}

/**
 * A table in a scrolling region. With `head`, its column titles (and, with `actions`, a last
 * column for row buttons) and `children` as the body's rows; without, `children` is the table.
 */
export function Table({
  label,
  head,
  actions,
  bodyClass,
  children,
}: {
  label: string;
  head?: string[];
  actions?: boolean;
  bodyClass?: string;
  children: ComponentChildren;
}) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must take keyboard focus (axe: scrollable-region-focusable)
    <section class="table-wrap" aria-label={label} tabIndex={0}>
      <table>
        {head ? (
          <>
            <thead>
              <tr>
                {head.map((h) => (
                  <th key={h}>{h}</th>
                ))}
                {actions && (
                  <th>
                    <span class="visually-hidden">Actions</span>
                  </th>
                )}
              </tr>
            </thead>
            <tbody class={bodyClass}>{children}</tbody>
          </>
        ) : (
          children
        )}
      </table>
    </section>
  );
}

/** Cursor pagination of one list: the cursor to ask with, a way back to the first page, and its pager. */
export function useCursorPages() {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1];
  return {
    cursor,
    onFirstPage: cursors.length === 1,
    first: () => setCursors([null]),
    pager: (next: string | null | undefined) => (
      <Pager
        page={cursors.length - 1}
        hasNext={Boolean(next)}
        onFirst={() => setCursors([null])}
        onNext={() => next && setCursors([...cursors, next])}
      />
    ),
  };
}
