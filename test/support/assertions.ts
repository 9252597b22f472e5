import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { HttpResult } from './postern.js';

/** Every file under `<stateDir>/spool` (temp and day directories), sorted. */
export function spoolFiles(stateDir: string): string[] {
  return readdirSync(path.join(stateDir, 'spool'), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => path.join(d.parentPath ?? d.path, d.name))
    .sort();
}

/** How many stored MIME files the spool holds. */
export function emlCount(stateDir: string): number {
  return spoolFiles(stateDir).filter((f) => f.endsWith('.eml')).length;
}

/** An exact error envelope without details, taking the human message from the response. */
export function assertErrorEnvelope(res: HttpResult, status: number, type: string, code: string): void {
  assert.equal(res.status, status, res.text);
  assert.equal(typeof res.body?.error?.message, 'string', res.text);
  assert.deepEqual(res.body, { error: { type, code, message: res.body.error.message } });
}

export function assertAccepted(res: HttpResult, status = 'queued'): void {
  assert.equal(res.status, 202, res.text);
  assert.equal(res.body.status, status, res.text);
}
