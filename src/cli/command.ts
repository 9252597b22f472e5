import type { Readable } from 'node:stream';
import type { ParseArgsConfig } from 'node:util';
import { createLogger, type Logger } from '../log.js';
import type { OperatorContext } from '../operator/context.js';
import { OperatorError } from '../operator/errors.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | string[] | boolean | undefined>;

/** One `postern GROUP VERB` command: its flags, its required flags, and what it does. */
export interface Command {
  usage: string;
  /** What `postern GROUP VERB --help` prints after the usage line (made when asked). */
  help?: () => string;
  options?: OptionSpec;
  required?: string[];
  /** Positional arguments (ids) it expects, by name. */
  positionals?: string[];
  /** With this flag given, no positional argument is expected (`message retry --filter …`, the bulk form). */
  positionalsUnless?: string;
  run(ctx: OperatorContext, values: Values, positionals: string[]): unknown;
}

export type CommandGroup = Record<string, Command>;

/** An operator command's logger (not the server's): warnings and errors on stderr, unless POSTERN_LOG_LEVEL says otherwise. */
export function commandLogger(): Logger {
  return createLogger(process.env.POSTERN_LOG_LEVEL ?? 'warn');
}

export const str = (v: string | string[] | boolean | undefined): string | undefined =>
  typeof v === 'string' ? v : undefined;

/** A repeatable flag's values (`--project A --project B`). */
export const strs = (v: string | string[] | boolean | undefined): string[] =>
  Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];

/** A whole number flag, or undefined when absent. */
export function int(name: string, v: string | string[] | boolean | undefined): number | undefined {
  const s = str(v);
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s))
    throw new OperatorError('invalid_argument', `--${name} must be a whole number`, name);
  return Number(s);
}

/** Bytes printed as they are (`message show --raw`), not as JSON. */
export class RawOutput {
  constructor(readonly stream: Readable) {}
}

/** Text printed as it is (CSV), chunk by chunk, instead of JSON. */
export class TextOutput {
  constructor(readonly chunks: Iterable<string> | AsyncIterable<string>) {}
}

/** Standard input, whole, without its final line break (`--password-stdin`). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}
