/**
 * Whether the server can be reached, as the app last saw it. A request that gets no answer (or
 * the live stream dropping with the server unreachable) marks it down; then the session is asked
 * for every few seconds until an answer comes, and every screen that listens reloads what it
 * shows (`whenReconnected`). The shell shows a banner meanwhile.
 */
import { useEffect, useState } from 'preact/hooks';

const PROBE_EVERY_MS = 2000;

let reachable = true;
const stateListeners = new Set<(reachable: boolean) => void>();
const reconnectListeners = new Set<() => void>();
let timer: ReturnType<typeof setTimeout> | null = null;
let asker: (() => Promise<boolean>) | null = null;

/** How to ask whether the server answers (true: it answered, whatever it said); set once by the API module. */
export function setProbe(ask: () => Promise<boolean>): void {
  asker = ask;
}

function schedule(): void {
  if (timer !== null || !asker) return;
  timer = setTimeout(() => {
    timer = null;
    void asker!().then((answered) => (answered ? markReachable() : schedule()));
  }, PROBE_EVERY_MS);
}

/** A request got no answer: the server is down or the network is. */
export function markUnreachable(): void {
  if (reachable) {
    reachable = false;
    for (const l of stateListeners) l(false);
  }
  schedule();
}

/** An answer came (any status): the server is reachable again. */
export function markReachable(): void {
  if (reachable) return;
  reachable = true;
  if (timer !== null) clearTimeout(timer);
  timer = null;
  for (const l of stateListeners) l(true);
  for (const l of reconnectListeners) l();
}

export const isReachable = (): boolean => reachable;

export function onReachability(listener: (reachable: boolean) => void): () => void {
  stateListeners.add(listener);
  return () => stateListeners.delete(listener);
}

/** Calls `listener` when the server answers again after being unreachable, or the operator signed in again. */
export function whenReconnected(listener: () => void): () => void {
  reconnectListeners.add(listener);
  return () => reconnectListeners.delete(listener);
}

/** Tells the screens to reload what they show (after signing in again in place). */
export function announceReconnected(): void {
  for (const l of reconnectListeners) l();
}

export function useReachable(): boolean {
  const [state, setState] = useState(reachable);
  useEffect(() => {
    setState(reachable);
    return onReachability(setState);
  }, []);
  return state;
}
