import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HANG_GUARD_MS } from './waiting.js';

/** A request as the emulator received it: the exact bytes, for golden comparisons. */
export interface RecordedRequest {
  method: string;
  /** Path and query. */
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** When its headers arrived (Date.now()): what a test of a throttle's window compares. */
  receivedAt: number;
}

export interface EmulatorReply {
  status: number;
  headers?: Record<string, string>;
  /** A string is sent as is; anything else as JSON. */
  body?: unknown;
}

/**
 * How the emulated provider behaves for the next requests. Each emulator answers each mode
 * with its provider's documented wire format (status, headers, error body):
 * - `ok`: the real success answer;
 * - `throttle`: the provider's rate-limit answer (429 and its reset headers, or its throttling error);
 * - `server_error`: its 5xx answer;
 * - `reject`: its answer refusing this message (a permanent 4xx);
 * - `suspended`: its answer for an account that can't send (bad credentials, suspended).
 */
export type EmulatorMode = 'ok' | 'throttle' | 'server_error' | 'reject' | 'suspended';

/**
 * What a provider emulator implements: check the request the way the real API does (auth,
 * endpoint, body shape) — an `EmulatorReply` with the provider's own error when it does not
 * match — and answer each mode.
 */
export type EmulatorHandler = (
  req: RecordedRequest,
  mode: EmulatorMode,
  emulator: ProviderEmulator,
) => EmulatorReply;

/**
 * A local stand-in for a provider's HTTP API, written from its public documentation. Tests
 * script it (`behave`), slow it (`delayMs`), and read what it received (`requests`).
 */
export class ProviderEmulator {
  readonly requests: RecordedRequest[] = [];
  /** Modes for the next requests, in order; when empty, `defaultMode`. */
  private readonly script: EmulatorMode[] = [];
  defaultMode: EmulatorMode = 'ok';
  /** Added before every answer (a slow provider). */
  delayMs = 0;
  /** While set, answers wait until it settles (a provider that answers only once the test lets it). */
  holdUntil: Promise<unknown> | null = null;
  private counter = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(handler: EmulatorHandler): Promise<ProviderEmulator> {
    let emulator: ProviderEmulator | undefined;
    const server = createServer((req, res) => {
      const receivedAt = Date.now();
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const recorded: RecordedRequest = {
          method: req.method ?? 'GET',
          url: req.url ?? '/',
          headers: req.headers,
          body: Buffer.concat(chunks),
          receivedAt,
        };
        const emu = emulator!;
        emu.requests.push(recorded);
        const mode = emu.script.shift() ?? emu.defaultMode;
        let reply: EmulatorReply;
        try {
          reply = handler(recorded, mode, emu);
        } catch (err) {
          reply = { status: 500, body: { emulator_error: (err as Error).message } };
        }
        const body =
          reply.body === undefined
            ? ''
            : typeof reply.body === 'string'
              ? reply.body
              : JSON.stringify(reply.body);
        const headers = {
          'content-type': typeof reply.body === 'string' ? 'text/plain' : 'application/json',
          ...reply.headers,
          'content-length': String(Buffer.byteLength(body)),
        };
        const answer = () => {
          if (res.destroyed) return;
          res.writeHead(reply.status, headers);
          res.end(body);
        };
        if (emu.holdUntil) void emu.holdUntil.then(answer, answer);
        else if (emu.delayMs > 0) setTimeout(answer, emu.delayMs).unref();
        else answer();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    emulator = new ProviderEmulator(
      server,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    );
    return emulator;
  }

  /** The next `times` requests are answered in `mode`. */
  behave(mode: EmulatorMode, times = 1): this {
    for (let i = 0; i < times; i++) this.script.push(mode);
    return this;
  }

  /** A fresh id per accepted message, in whatever format the emulator wraps it. */
  nextId(): number {
    return ++this.counter;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Posts a provider notification to a Postern feedback endpoint, exactly these bytes. */
export async function postFeedback(
  baseUrl: string,
  accountId: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  token?: string,
): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(
    `${baseUrl}/v1/feedback/${accountId}${token === undefined ? '' : `/${token}`}`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: body as BodyInit,
      signal: AbortSignal.timeout(HANG_GUARD_MS),
    },
  );
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text };
}
