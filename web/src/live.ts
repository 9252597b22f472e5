/**
 * The console's live updates (server-sent events): one stream for the whole signed-in app,
 * opened by the shell. Screens subscribe with the project and environment they show (filtered
 * here), and read its state: `live` only while the stream is open, so a screen never says "up
 * to date" while it cannot know. When the stream drops, the server is asked whether it still
 * answers: if not, the connection monitor shows its banner and reopens the stream once it
 * does; a 401 is the session ending (the sign-in form); otherwise the stream is reopened.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { API_BASE, ApiError, api } from './api';
import {
  announceReconnected,
  isReachable,
  markUnreachable,
  onReachability,
  whenReconnected,
} from './connection';

export interface MessageChange {
  id: string;
  status: string;
  project_id: string;
  environment: 'production' | 'sandbox';
  type: string;
}

/** A bulk action's note (`event: refresh`): many messages changed at once. */
export interface BulkChange {
  reason: string;
  action?: string;
  count: number;
}

export type LiveState = 'connecting' | 'live' | 'down';

interface Subscriber {
  filter: { project?: string; environment?: string };
  onChange(c: MessageChange): void;
  onRefresh(r: BulkChange): void;
}

const REOPEN_AFTER_MS = 1000;
/** A stream refused again and again (one tab too many over the operator's stream cap) waits longer each time. */
const REOPEN_AT_MOST_MS = 30_000;

let source: EventSource | null = null;
let wanted = false;
let state: LiveState = 'down';
let reopenTimer: ReturnType<typeof setTimeout> | null = null;
/** The stream dropped since it last opened: changes may have been missed. */
let missed = false;
/** Drops since the stream was last open: the reopening waits 1 s, 2 s, 4 s… up to 30 s. */
let failures = 0;
const subscribers = new Set<Subscriber>();
const stateListeners = new Set<(s: LiveState) => void>();

function setState(next: LiveState): void {
  if (state === next) return;
  state = next;
  for (const l of stateListeners) l(next);
}

function open(): void {
  if (source || !wanted) return;
  setState('connecting');
  const es = new EventSource(`${API_BASE}/events/stream`);
  source = es;
  es.addEventListener('open', () => {
    setState('live');
    failures = 0;
    // Whatever changed while it was closed was not announced: the screens read theirs again.
    if (missed) announceReconnected();
    missed = false;
  });
  es.addEventListener('message', (e) => {
    const change = JSON.parse((e as MessageEvent<string>).data) as MessageChange;
    for (const s of subscribers) {
      if (s.filter.project && s.filter.project !== change.project_id) continue;
      if (s.filter.environment && s.filter.environment !== change.environment) continue;
      s.onChange(change);
    }
  });
  es.addEventListener('refresh', (e) => {
    const data = JSON.parse((e as MessageEvent<string>).data) as Partial<BulkChange>;
    const change: BulkChange = {
      reason: data.reason ?? 'bulk',
      action: data.action,
      count: typeof data.count === 'number' ? data.count : 1,
    };
    for (const s of subscribers) s.onRefresh(change);
  });
  // The browser would retry by itself, but cannot tell a server that is down from a session
  // that ended (a 401 closes the stream for good): ask, then reopen.
  es.addEventListener('error', () => {
    es.close();
    if (source === es) source = null;
    missed = true;
    setState('down');
    void api('GET', '/session').then(
      () => reopenSoon(),
      (err: unknown) => {
        if (err instanceof ApiError && err.status === 0) markUnreachable();
      },
    );
  });
}

function reopenSoon(): void {
  if (reopenTimer !== null) return;
  const delay = Math.min(REOPEN_AFTER_MS * 2 ** failures, REOPEN_AT_MOST_MS);
  failures++;
  reopenTimer = setTimeout(() => {
    reopenTimer = null;
    open();
  }, delay);
}

/**
 * Ends the stream for good (unmounted, or signing out). Signing out closes it first: the server
 * ends a session's streams with it, and the error handler would then ask for a session that is gone.
 */
export function closeLiveStream(): void {
  wanted = false;
  missed = false;
  failures = 0;
  source?.close();
  source = null;
  if (reopenTimer !== null) clearTimeout(reopenTimer);
  reopenTimer = null;
  setState('down');
}

// Back from an outage, or signed in again after the session ended: the stream opens again.
onReachability((reachable) => {
  if (reachable && wanted && !source) open();
});
whenReconnected(() => {
  if (wanted && !source && isReachable()) open();
});

/** Keeps the app's stream open while mounted (the shell, signed in). */
export function useLiveStream(): void {
  useEffect(() => {
    wanted = true;
    if (isReachable()) open();
    return closeLiveStream;
  }, []);
}

export function useLiveState(): LiveState {
  const [s, setS] = useState(state);
  useEffect(() => {
    setS(state);
    stateListeners.add(setS);
    return () => void stateListeners.delete(setS);
  }, []);
  return s;
}

/** Calls `onChange` for each changed message of `filter`, and `onRefresh` after bulk actions, while mounted. */
export function useLiveMessages(
  filter: { project?: string; environment?: string },
  onChange: (c: MessageChange) => void,
  onRefresh: (r: BulkChange) => void,
): void {
  const handlers = useRef({ onChange, onRefresh });
  handlers.current = { onChange, onRefresh };
  useEffect(() => {
    const s: Subscriber = {
      filter,
      onChange: (c) => handlers.current.onChange(c),
      onRefresh: (r) => handlers.current.onRefresh(r),
    };
    subscribers.add(s);
    return () => void subscribers.delete(s);
  }, [filter.project, filter.environment]);
}
