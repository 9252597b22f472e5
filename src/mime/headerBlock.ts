/**
 * Where the top-level header block of `data` ends: just after its first empty line, a LF
 * followed by LF or CRLF (bare-LF header lines included). mailsplit's Splitter, which the SMTP
 * door rewrites headers with, and mailauth's DKIM message parser both read it so. -1 when
 * `data` holds no empty line (yet).
 */
export function headerBlockEnd(data: Uint8Array): number {
  if (data[0] === 0x0a) return 1;
  if (data[0] === 0x0d && data[1] === 0x0a) return 2;
  for (let i = data.indexOf(0x0a); i !== -1 && i < data.length - 1; i = data.indexOf(0x0a, i + 1)) {
    if (data[i + 1] === 0x0a) return i + 2;
    if (data[i + 1] === 0x0d && data[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}
