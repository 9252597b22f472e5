/** The JSON lines of a server's log text (stderr or its log file), parsed; other lines skipped. */
export function jsonLogLines<Line>(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Line);
}
