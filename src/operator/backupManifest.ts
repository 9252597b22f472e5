/** `backup.json`: written last by backup, checked by restore before anything is put in place (docs/operations.md#backup-and-restore). */

import { VIEWER_KEY_FILE } from '../policy/viewerKey.js';
import { INDEX_FILE } from '../store/backup.js';
import { BODY_IN_INDEX } from '../store/messageBodies.js';
import { OperatorError } from './errors.js';

export const MANIFEST_FILE = 'backup.json';
/** 3: every file's size and SHA-256. Formats 1 and 2 have no checksums: restore refuses them rather than put back unchecked files. */
export const MANIFEST_FORMAT = 3;

export interface ContentEntry {
  path: string;
  size: number;
  sha256: string;
}

export interface BackupManifest {
  format: number;
  created_at: string;
  messages: number;
  files: number;
  bytes: number;
  /** No spool file. */
  bodies_in_index: number;
  /** Deleted between the snapshot and the file's copy. */
  missing: string[];
  contents: ContentEntry[];
}

export interface IndexedFile {
  id: string;
  spool_path: string;
  size_bytes: number;
}

export function spoolEntryPath(spoolPath: string): string {
  return `spool/${spoolPath}`;
}

/** Never '.', '..' or a hidden name (the restore's staging directory is one). */
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Nothing a crafted backup.json names lands outside the state directory. */
function isBackupPath(p: string): boolean {
  const parts = p.split('/');
  if (!parts.every((part) => SEGMENT.test(part))) return false;
  if (parts[0] === INDEX_FILE || parts[0] === VIEWER_KEY_FILE) return parts.length === 1;
  if (parts[0] === 'certs') return parts.length === 2;
  if (parts[0] === 'spool') return parts.length === 3;
  return false;
}

const isCount = (v: unknown): v is number =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function parseManifest(text: string, from: string): BackupManifest {
  const refuse = (why: string) =>
    new OperatorError('invalid_argument', `${from}/${MANIFEST_FILE} ${why}`, 'from');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw refuse('is not JSON: this is not a finished Postern backup');
  }
  if (!isRecord(value) || !isCount(value.format))
    throw refuse('has no format: this is not a finished Postern backup');
  if (value.format < MANIFEST_FORMAT) {
    throw new OperatorError(
      'invalid_argument',
      `${from} is a backup of format ${value.format}, made before backups recorded each file's size and SHA-256: this release restores only backups it can check (format ${MANIFEST_FORMAT}), so nothing was restored. Restore it with the release that made it, or take a new backup with this one`,
      'from',
    );
  }
  if (value.format > MANIFEST_FORMAT) {
    throw new OperatorError(
      'invalid_argument',
      `${from} is a backup of format ${value.format}, from a newer release; this release restores format ${MANIFEST_FORMAT}`,
      'from',
    );
  }
  for (const key of ['messages', 'files', 'bytes', 'bodies_in_index'] as const) {
    if (!isCount(value[key])) throw refuse(`has no valid "${key}" (a count)`);
  }
  if (typeof value.created_at !== 'string') throw refuse('has no valid "created_at"');
  const { missing, contents } = value;
  if (!Array.isArray(missing) || !missing.every((id) => typeof id === 'string'))
    throw refuse('has no valid "missing" (a list of message ids)');
  if (!Array.isArray(contents))
    throw refuse('has no "contents" (each file\'s path, size and SHA-256)');
  const seen = new Set<string>();
  const entries: ContentEntry[] = [];
  for (const entry of contents) {
    if (
      !isRecord(entry) ||
      typeof entry.path !== 'string' ||
      !isBackupPath(entry.path) ||
      !isCount(entry.size) ||
      typeof entry.sha256 !== 'string' ||
      !SHA256_HEX.test(entry.sha256)
    ) {
      throw refuse(
        `lists a file it should not: ${JSON.stringify(entry).slice(0, 200)} (each entry is {"path","size","sha256"}, a path backup writes)`,
      );
    }
    if (seen.has(entry.path)) throw refuse(`lists ${entry.path} twice`);
    seen.add(entry.path);
    entries.push({ path: entry.path, size: entry.size, sha256: entry.sha256 });
  }
  if (!seen.has(INDEX_FILE)) throw refuse(`does not list the index (${INDEX_FILE})`);
  return {
    format: value.format,
    created_at: value.created_at,
    messages: value.messages as number,
    files: value.files as number,
    bytes: value.bytes as number,
    bodies_in_index: value.bodies_in_index as number,
    missing: missing as string[],
    contents: entries,
  };
}

export function countProblems(manifest: BackupManifest, rows: IndexedFile[]): string[] {
  const problems: string[] = [];
  if (manifest.messages !== rows.length)
    problems.push(
      `backup.json says ${manifest.messages} messages; the index copy holds ${rows.length}`,
    );
  const inIndex = rows.filter((row) => row.spool_path === BODY_IN_INDEX).length;
  if (manifest.bodies_in_index !== inIndex)
    problems.push(
      `backup.json says ${manifest.bodies_in_index} messages have their body in the index; the index copy has ${inIndex}`,
    );
  const spool = manifest.contents.filter((entry) => entry.path.startsWith('spool/'));
  const bytes = spool.reduce((sum, entry) => sum + entry.size, 0);
  if (manifest.files !== spool.length || manifest.bytes !== bytes) {
    problems.push(
      `backup.json says ${manifest.files} spool files of ${manifest.bytes} bytes; it lists ${spool.length} of ${bytes}`,
    );
  }
  const listed = new Map(spool.map((entry) => [entry.path, entry]));
  const missing = new Set(manifest.missing);
  for (const row of rows) {
    if (row.spool_path === BODY_IN_INDEX) continue;
    const p = spoolEntryPath(row.spool_path);
    const entry = listed.get(p);
    if (entry) {
      listed.delete(p);
      if (missing.delete(row.id))
        problems.push(`backup.json lists ${row.id} as missing and its file ${p} too`);
      if (entry.size !== row.size_bytes)
        problems.push(
          `${p} is ${entry.size} bytes in backup.json; the index says ${row.size_bytes}`,
        );
    } else if (!missing.delete(row.id)) {
      problems.push(
        `message ${row.id}'s spool file ${p} is neither in backup.json nor listed as missing`,
      );
    }
  }
  for (const p of listed.keys())
    problems.push(`${p} is in backup.json, but no message of the index copy names it`);
  for (const id of missing)
    problems.push(
      `backup.json lists ${id} as missing, but the index copy has no message ${id} with a spool file`,
    );
  return problems;
}
