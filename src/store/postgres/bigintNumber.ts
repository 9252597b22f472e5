/**
 * BIGINT (int8) arrives from pg as a string, since it may pass 2^53. It is parsed per query,
 * not with pg's process-wide `types.setTypeParser`: that would change what every other user of
 * pg in the process reads (the tests' own queries, any later module). The values Postern keeps
 * in BIGINT (millisecond times, byte and message counters) stay far below 2^53; one that did
 * not is refused loudly rather than rounded.
 */
export function bigintNumber(value: string | number, what: string): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n))
    throw new RangeError(`${what}: ${value} is not an integer JavaScript can hold exactly`);
  return n;
}

/** A nullable BIGINT column, parsed as bigintNumber parses one. */
export function nullableBigintNumber(value: string | number | null, what: string): number | null {
  return value === null ? null : bigintNumber(value, what);
}
