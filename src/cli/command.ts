import type { ParseArgsConfig } from 'node:util';
import type { OperatorContext } from '../operator/context.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | boolean | undefined>;

/** One `postern GROUP VERB` command: its flags, its required flags, and what it does. */
export interface Command {
  usage: string;
  options?: OptionSpec;
  required?: string[];
  /** Positional arguments (ids) it expects, by name. */
  positionals?: string[];
  run(ctx: OperatorContext, values: Values, positionals: string[]): unknown;
}

export type CommandGroup = Record<string, Command>;

export const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
