/**
 * `postern backup --to DIR` and `postern restore --from DIR` (README, "Backup and restore").
 *
 * Backup, while the server runs: the index first, with SQLite's online backup API from a reader
 * connection (store/backup.ts: one consistent snapshot, with the bodies the index keeps), then the spool files that the copy's
 * rows name, each copied (a reflink where the filesystem has them) and flushed, then the
 * self-signed certificates, then `backup.json`, written last: a directory without it is not a
 * finished backup. Files are copied, never hard-linked: the spool empties a finished message's
 * file in place to reuse it (Spool.retire), which would empty a hard link in the backup too.
 * A message deleted between the snapshot and its file's copy (retention, an operator) is listed
 * as missing; it was gone from the server by then anyway.
 *
 * Restore only into an empty (or absent) state directory: the same layout, made private, the
 * index checked (quick_check) before it says done.
 */
import { constants, existsSync, readdirSync, statSync } from 'node:fs';
import { copyFile, mkdir, open, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.js';
import { ensurePrivateDirectory, ensurePrivateFile } from '../platform/privateFiles.js';
import { backupIndex, INDEX_FILE, quickCheck, spoolFilesOfCopy } from '../store/backup.js';
import { BODY_IN_INDEX } from '../store/messageBodies.js';
import { openDatabase } from '../store/db.js';
import { OperatorError } from './errors.js';

const MANIFEST = 'backup.json';
/** 2: message bodies may be in the index (migration 8); a release that knows only format 1 refuses it rather than restore messages without bodies. */
const FORMAT = 2;
/** Formats this release restores (a format-1 copy gets migration 8 when it is opened). */
const RESTORABLE_FORMATS = [1, 2];
/** Files copied at once. */
const COPY_PARALLEL = 8;
/** Besides the index and the spool: the state directory's self-signed SMTP certificate pair. */
const EXTRA_DIRS = ['certs'];

export interface BackupManifest {
  format: number;
  created_at: string;
  messages: number;
  /** Spool files copied, and their bytes. */
  files: number;
  bytes: number;
  /** Messages whose MIME is in the index copy itself (no spool file). */
  bodies_in_index: number;
  /** Messages in the index copy whose file was gone by the time it was copied (deleted meanwhile). */
  missing: string[];
}

function isEmptyOrAbsent(dir: string): boolean {
  return !existsSync(dir) || (statSync(dir).isDirectory() && readdirSync(dir).length === 0);
}

/** Flushes a file or directory to disk. */
async function flush(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Copies `from` to `to` (a reflink where the filesystem can), flushed; the directories are flushed by the caller. */
async function copyDurably(from: string, to: string): Promise<number> {
  await copyFile(from, to, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
  await flush(to);
  return statSync(to).size;
}

/** Directories made (or being made) for copies: a copy waits for its directory's mkdir, never races it. */
class Directories {
  private readonly made = new Map<string, Promise<unknown>>();

  constructor(root: string) {
    this.made.set(root, Promise.resolve());
  }

  ensure(dir: string): Promise<unknown> {
    let making = this.made.get(dir);
    if (!making) {
      making = mkdir(dir, { recursive: true, mode: 0o700 });
      this.made.set(dir, making);
    }
    return making;
  }

  /** Every directory, deepest first (flushed after their files). */
  deepestFirst(): string[] {
    return [...this.made.keys()].sort((a, b) => b.length - a.length);
  }
}

/** Runs `work` over `items`, COPY_PARALLEL at a time. */
async function inParallel<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(COPY_PARALLEL, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/** Copies a directory tree (the certificates), files flushed. */
async function copyTree(from: string, to: string, dirs: Directories): Promise<void> {
  await dirs.ensure(to);
  for (const entry of await readdir(from, { withFileTypes: true })) {
    if (entry.isDirectory()) await copyTree(path.join(from, entry.name), path.join(to, entry.name), dirs);
    else if (entry.isFile()) await copyDurably(path.join(from, entry.name), path.join(to, entry.name));
  }
}

/** A consistent copy of `stateDir` into `to` (new or empty), while the server may run. */
export async function backupState(stateDir: string, to: string, logger: Logger): Promise<BackupManifest & { to: string }> {
  if (!existsSync(path.join(stateDir, INDEX_FILE))) throw new OperatorError('not_found', `no index in ${stateDir}: nothing to back up`);
  if (!isEmptyOrAbsent(to)) throw new OperatorError('conflict', `${to} is not empty: back up into a new or empty directory`);
  ensurePrivateDirectory(to);
  const dirs = new Directories(to);
  const indexCopy = path.join(to, INDEX_FILE);
  // Created private before SQLite writes into it: the index holds provider secrets.
  ensurePrivateFile(indexCopy, { create: true });
  const db = openDatabase(stateDir, logger, { migrate: false });
  try {
    await backupIndex(db, indexCopy);
  } finally {
    db.close();
  }
  await flush(indexCopy);

  const rows = spoolFilesOfCopy(indexCopy);
  const withFiles = rows.filter((row) => row.spool_path !== BODY_IN_INDEX);
  const missing: string[] = [];
  let bytes = 0;
  let files = 0;
  await inParallel(withFiles, async (row) => {
    const target = path.join(to, 'spool', row.spool_path);
    await dirs.ensure(path.dirname(target));
    try {
      bytes += await copyDurably(path.join(stateDir, 'spool', row.spool_path), target);
      files++;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      missing.push(row.id);
    }
  });
  await dirs.ensure(path.join(to, 'spool'));
  for (const extra of EXTRA_DIRS) if (existsSync(path.join(stateDir, extra))) await copyTree(path.join(stateDir, extra), path.join(to, extra), dirs);

  const manifest: BackupManifest = {
    format: FORMAT,
    created_at: new Date().toISOString(),
    messages: rows.length,
    files,
    bytes,
    bodies_in_index: rows.length - withFiles.length,
    missing,
  };
  // Directories first (deepest first), then the manifest: it marks a finished backup.
  for (const dir of dirs.deepestFirst()) await flush(dir);
  await writeFile(path.join(to, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 });
  await flush(path.join(to, MANIFEST));
  await flush(to);
  return { to, ...manifest };
}

/** Restores a backup made by backupState into `stateDir`, which must be empty or absent. */
export async function restoreState(from: string, stateDir: string, logger: Logger): Promise<{ from: string; state_dir: string; messages: number; files: number; created_at: string }> {
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(await readFile(path.join(from, MANIFEST), 'utf8')) as BackupManifest;
  } catch {
    throw new OperatorError('invalid_argument', `${from} is not a finished Postern backup (no readable ${MANIFEST})`, 'from');
  }
  if (!RESTORABLE_FORMATS.includes(manifest.format)) {
    throw new OperatorError('invalid_argument', `${from} is a backup of format ${manifest.format}; this release restores formats ${RESTORABLE_FORMATS.join(' and ')}`, 'from');
  }
  if (!isEmptyOrAbsent(stateDir)) {
    throw new OperatorError('conflict', `the state directory ${stateDir} is not empty: restore only into an empty one (set state_dir or POSTERN_STATE_DIR to a new directory)`);
  }
  ensurePrivateDirectory(stateDir);
  const dirs = new Directories(stateDir);
  await copyDurably(path.join(from, INDEX_FILE), path.join(stateDir, INDEX_FILE));
  let files = 0;
  const spool = path.join(from, 'spool');
  if (existsSync(spool)) {
    const entries = readdirSync(spool, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    await inParallel(entries, async (e) => {
      const rel = path.relative(spool, path.join(e.parentPath, e.name));
      const target = path.join(stateDir, 'spool', rel);
      await dirs.ensure(path.dirname(target));
      await copyDurably(path.join(spool, rel), target);
      files++;
    });
    await dirs.ensure(path.join(stateDir, 'spool'));
  }
  for (const extra of EXTRA_DIRS) if (existsSync(path.join(from, extra))) await copyTree(path.join(from, extra), path.join(stateDir, extra), dirs);
  for (const dir of dirs.deepestFirst()) await flush(dir);
  // Opened as the server would (private files, WAL, migrations of a newer release), then checked.
  const db = openDatabase(stateDir, logger);
  try {
    const check = quickCheck(db);
    if (check !== 'ok') throw new OperatorError('conflict', `the restored index fails its check: ${check}`);
  } finally {
    db.close();
  }
  return { from, state_dir: stateDir, messages: manifest.messages, files, created_at: manifest.created_at };
}
