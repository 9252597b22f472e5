import type { SMTPServer } from 'smtp-server';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { liveConnections } from './liveConnection.js';

// A total lifetime and a shorter one to authenticate in: a session without a key cannot hold a slot for long.
export function sweepSessions(
  server: SMTPServer,
  sessions: ReadonlyMap<string, { started: number; key: string | null }>,
  limits: Pick<PosternConfig['smtp'], 'session_timeout_ms' | 'unauthenticated_timeout_ms'>,
  clock: Clock,
): NodeJS.Timeout {
  const sweep = setInterval(
    () => {
      const now = clock.now();
      for (const c of liveConnections(server)) {
        const state = sessions.get(c.session.id);
        if (!state) continue;
        if (now - state.started > limits.session_timeout_ms) {
          c.send(421, 'Session too long; reconnect');
          c.close();
        } else if (state.key === null && now - state.started > limits.unauthenticated_timeout_ms) {
          c.send(421, 'Not authenticated in time; reconnect');
          c.close();
        }
      }
    },
    Math.min(5000, limits.session_timeout_ms, limits.unauthenticated_timeout_ms),
  );
  sweep.unref();
  return sweep;
}
