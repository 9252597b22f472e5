import { type Logger, pino, stdSerializers } from 'pino';

export type { Logger };

/** Secrets that can hide in text the code does not write itself (an error's message, a request path). */
const SECRET_PATTERNS: [RegExp, string][] = [
  [/\bps_(live|test)_[A-Za-z0-9]{40}\b/g, 'ps_$1_[redacted]'],
  [/\bwhsec_[A-Za-z0-9+/=_-]+/g, 'whsec_[redacted]'],
  [/\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+/gi, '$1 [redacted]'],
  [/(\/\/[^/\s:@]*):[^@\s/]*@/g, '$1:[redacted]@'],
];

const PATH_SEPARATOR = /\/|\\|%2f|%5c/gi;

interface Segment {
  name: string;
  /** The index of `path` after this segment (and its separator): the mask starts here. */
  next: number;
}

function leniently(text: string): string {
  let out = text;
  for (let i = 0; i < 3 && out.includes('%'); i++) {
    const decoded = out.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) =>
      String.fromCharCode(parseInt(hex, 16)),
    );
    if (decoded === out) break;
    out = decoded;
  }
  return out;
}

/** The segments as the most lenient server or proxy could read them; `a%252Fb` is masked whole. */
function lenientSegments(path: string): Segment[] {
  const segments: Segment[] = [];
  const push = (raw: string, start: number, next: number) => {
    const parts = leniently(raw).split(/[\\/]/);
    for (const part of parts)
      segments.push({
        name: part.split(';')[0].toLowerCase(),
        next: parts.length === 1 ? next : start,
      });
  };
  let start = 0;
  for (const m of path.matchAll(PATH_SEPARATOR)) {
    push(path.slice(start, m.index), start, m.index + m[0].length);
    start = m.index + m[0].length;
  }
  push(path.slice(start), start, path.length);
  return segments;
}

function secretStart(segments: Segment[]): number {
  let from = Infinity;
  for (let i = 0; i < segments.length; i++) {
    const name = segments[i].name;
    if (name === 'feedback' && segments[i + 1]) from = Math.min(from, segments[i + 1].next);
    if (name === 'view' && segments[i + 1]) from = Math.min(from, segments[i + 1].next);
  }
  return from;
}

/** Feedback endpoint secrets and viewer tokens replaced by `***` in any spelling a server or proxy might route (docs/configuration.md). */
export function maskPathSecrets(path: string): string {
  const all = lenientSegments(path).filter((s) => s.name !== '' && s.name !== '.');
  // Read both as written and with `..` resolved: a secret masked under either reading.
  const resolved: Segment[] = [];
  for (const s of all) {
    if (s.name === '..') resolved.pop();
    else resolved.push(s);
  }
  const from = Math.min(secretStart(all.filter((s) => s.name !== '..')), secretStart(resolved));
  if (from >= path.length) return path;
  const body =
    /\/body$/.test(path) && path.length - 5 > from && !/[/\\%]/.test(path.slice(from, -5))
      ? '/body'
      : '';
  return `${path.slice(0, from)}***${body}`;
}

export function maskSecrets(text: string): string {
  let out = text;
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement);
  return out.replace(/[^\s"'`]+/g, (word) => maskPathSecrets(word));
}

function maskedStrings(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskSecrets(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => maskedStrings(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) out[key] = maskedStrings(v, depth + 1);
  return out;
}

function maskedError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  return maskedStrings(stdSerializers.err(err));
}

/** The one logger: JSON on stderr (stdout is CLI output). Secrets are never passed to it; redaction is a second line of defence. */
export function createLogger(level: string = process.env.POSTERN_LOG_LEVEL ?? 'info'): Logger {
  // Every child, so a new level (SIGHUP) reaches them all.
  const children = new Set<WeakRef<Logger>>();
  const root = pino(
    {
      level,
      onChild: (child) => {
        for (const ref of children) if (ref.deref() === undefined) children.delete(ref);
        children.add(new WeakRef(child));
      },
      base: { service: 'postern' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      serializers: { err: maskedError },
      redact: {
        // Each `*.` path costs every log line about 1 µs: new names go at the top level only.
        paths: [
          'key',
          'api_key',
          'apiKey',
          'password',
          'pass',
          'secret',
          'webhook_secret',
          'token',
          'authorization',
          '*.authorization',
          '*.key',
          '*.password',
          '*.pass',
          '*.secret',
          'headers.authorization',
        ],
        censor: '[redacted]',
      },
    },
    // Buffered: a crash may lose the last few lines, never data; stop() flushes.
    pino.destination({ fd: 2, sync: false, minLength: 4096 }),
  );
  familyOf.set(root, children);
  return root;
}

const familyOf = new WeakMap<Logger, Set<WeakRef<Logger>>>();

/** pino's children keep the level they were made with, so each is set too. */
export function setLogLevel(root: Logger, level: string): void {
  root.level = level;
  for (const ref of familyOf.get(root) ?? []) {
    const child = ref.deref();
    if (child) child.level = level;
  }
}

export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
