/** How the CLI answers: a command's result, human-readable or one JSON line (`--json`), and its errors. */
export interface Output {
  json: boolean;
  print(value: unknown): void;
  fail(code: string, message: string, extra?: Record<string, unknown>): void;
}

export function output(json: boolean): Output {
  return {
    json,
    print(value) {
      process.stdout.write(json ? `${JSON.stringify(value)}\n` : `${human(value)}\n`);
    },
    fail(code, message, extra = {}) {
      if (json) process.stdout.write(`${JSON.stringify({ error: { code, message, ...extra } })}\n`);
      else process.stderr.write(`postern: ${message}\n`);
    },
  };
}

function human(value: unknown, indent = ''): string {
  if (value === null || typeof value !== 'object') return `${indent}${String(value)}`;
  const lines: string[] = [];
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (Array.isArray(v) && v.every((x) => typeof x === 'object' && x !== null)) {
      lines.push(`${indent}${k}: ${v.length === 0 ? '(none)' : ''}`);
      for (const item of v)
        lines.push(
          `${indent}  - ${Object.entries(item)
            .filter(([, iv]) => iv !== undefined)
            .map(([ik, iv]) => `${ik}=${typeof iv === 'object' ? JSON.stringify(iv) : String(iv)}`)
            .join(' ')}`,
        );
    } else {
      lines.push(
        `${indent}${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}`,
      );
    }
  }
  return lines.join('\n');
}
