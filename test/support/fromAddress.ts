/**
 * Clients that connect from a chosen loopback address (127.0.0.2, 127.0.0.3, …: Linux routes
 * all of 127.0.0.0/8 to the loopback interface), so one test can be a load balancer, a client
 * behind it and a client that connects directly, each with an address of its own.
 */
import http from 'node:http';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../src/log.js';
import { type HttpResult, toResult } from './postern.js';
import { HANG_GUARD_MS } from './waiting.js';

/** One HTTP request on a connection of its own from `localAddress` (fetch cannot choose it); the answer read whole. */
export function requestFrom(
  localAddress: string,
  url: string,
  opts: { method?: string; headers?: Record<string, string>; json?: unknown } = {},
): Promise<HttpResult> {
  const body = opts.json === undefined ? undefined : JSON.stringify(opts.json);
  const headers = {
    ...(body === undefined
      ? {}
      : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
    ...opts.headers,
  };
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: opts.method ?? (body === undefined ? 'GET' : 'POST'),
        headers,
        localAddress,
        agent: false,
        timeout: HANG_GUARD_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const fetchHeaders = new Headers();
          for (const [name, value] of Object.entries(res.headers))
            if (value !== undefined)
              fetchHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
          // Read as a fetch answer is (postern.ts), so both kinds of test see one shape.
          resolve(
            toResult(
              new Response(chunks.length > 0 ? Buffer.concat(chunks) : null, {
                status: res.statusCode,
                headers: fetchHeaders,
              }),
            ),
          );
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in ${HANG_GUARD_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A logger at `level` whose lines are kept, parsed, in `lines` (the server's log, read by a test). */
export function capturedLogger(level = 'info'): {
  logger: Logger;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}
