/**
 * A config problem, naming the offending key (null: the file as a whole); the process exits
 * non-zero before touching state.
 * Its own module: the store's threads throw it without loading the config schema and its
 * validator (each worker thread would otherwise compile both, a few MiB of heap apiece).
 */
export class ConfigError extends Error {
  constructor(
    message: string,
    readonly key: string | null,
  ) {
    super(message);
  }
}
