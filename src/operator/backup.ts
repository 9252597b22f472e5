/**
 * `postern backup` and `postern restore` (docs/operations.md#backup-and-restore). Files are copied, never
 * hard-linked: the spool empties a finished message's file in place to reuse it. Restore stages in the
 * state directory (same filesystem: atomic renames) and changes nothing until everything checks.
 */
import { createHash } from 'node:crypto';
import { constants, existsSync, readdirSync, type Stats, statSync } from 'node:fs';
import { copyFile, lstat, mkdir, mkdtemp, open, readFile, readdir, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.js';
import { checkOwnEntry, ensurePrivateDirectory, ensurePrivateFile, StateFileError } from '../platform/privateFiles.js';
import { VIEWER_KEY_FILE } from '../policy/viewerKey.js';
import { backupIndex, INDEX_FILE, quickCheck, spoolFilesOfCopy } from '../store/backup.js';
import { BODY_IN_INDEX } from '../store/messageBodies.js';
import { openDatabase } from '../store/db.js';
import { countProblems, MANIFEST_FILE, MANIFEST_FORMAT, parseManifest, spoolEntryPath, type BackupManifest, type ContentEntry } from './backupManifest.js';
import { OperatorError } from './errors.js';

const COPY_PARALLEL = 8;
/** Besides the index and the spool: the self-signed SMTP certificate pair. */
const EXTRA_DIRS = ['certs'];
/** Without it, every viewer link handed out stops opening. */
const EXTRA_FILES = [VIEWER_KEY_FILE];
const DIGEST_CHUNK = 256 * 1024;
/** '.': never a name a backup holds. */
const STAGING_PREFIX = '.restore-';
const PROBLEMS_NAMED = 5;

export type BackupSummary = Omit<BackupManifest, 'contents'> & { to: string };

function isEmptyOrAbsent(dir: string): boolean {
  return !existsSync(dir) || (statSync(dir).isDirectory() && readdirSync(dir).length === 0);
}

async function flush(file: string): Promise<void> {
  const handle = await open(file, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function digestAndFlush(file: string): Promise<{ size: number; sha256: string }> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const hash = createHash('sha256');
    const buffer = Buffer.allocUnsafe(DIGEST_CHUNK);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      size += bytesRead;
    }
    await handle.sync();
    return { size, sha256: hash.digest('hex') };
  } finally {
    await handle.close();
  }
}

async function copyNew(from: string, to: string): Promise<void> {
  await copyFile(from, to, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
}

/** A copy waits for its directory's mkdir, never races it. */
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

  deepestFirst(): string[] {
    return [...this.made.keys()].sort((a, b) => b.length - a.length);
  }
}

async function inParallel<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(COPY_PARALLEL, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

async function backUpFile(stateDir: string, to: string, rel: string, dirs: Directories): Promise<ContentEntry> {
  checkOwnEntry(path.join(stateDir, rel), 'file');
  await dirs.ensure(path.dirname(path.join(to, rel)));
  await copyNew(path.join(stateDir, rel), path.join(to, rel));
  return { path: rel.split(path.sep).join('/'), ...(await digestAndFlush(path.join(to, rel))) };
}

async function backUpTree(stateDir: string, to: string, rel: string, dirs: Directories, contents: ContentEntry[]): Promise<void> {
  checkOwnEntry(path.join(stateDir, rel), 'directory');
  await dirs.ensure(path.join(to, rel));
  for (const entry of await readdir(path.join(stateDir, rel), { withFileTypes: true })) {
    const child = path.join(rel, entry.name);
    if (entry.isDirectory()) await backUpTree(stateDir, to, child, dirs, contents);
    else contents.push(await backUpFile(stateDir, to, child, dirs));
  }
}

function prepareDestination(to: string): void {
  try {
    ensurePrivateDirectory(to);
  } catch (err) {
    if (err instanceof StateFileError) throw new OperatorError('invalid_argument', `${to} cannot hold a backup: ${err.message}`, 'to');
    throw err;
  }
}

export async function backupState(stateDir: string, to: string, logger: Logger): Promise<BackupSummary> {
  if (!existsSync(path.join(stateDir, INDEX_FILE))) throw new OperatorError('not_found', `no index in ${stateDir}: nothing to back up`);
  if (!isEmptyOrAbsent(to)) throw new OperatorError('conflict', `${to} is not empty: back up into a new or empty directory`);
  prepareDestination(to);
  const dirs = new Directories(to);
  const contents: ContentEntry[] = [];
  const indexCopy = path.join(to, INDEX_FILE);
  // Created private before SQLite writes into it: the index holds provider secrets.
  ensurePrivateFile(indexCopy, { create: true });
  const db = openDatabase(stateDir, logger, { migrate: false });
  try {
    await backupIndex(db, indexCopy);
  } finally {
    db.close();
  }
  contents.push({ path: INDEX_FILE, ...(await digestAndFlush(indexCopy)) });

  const rows = spoolFilesOfCopy(indexCopy);
  const withFiles = rows.filter((row) => row.spool_path !== BODY_IN_INDEX);
  const missing: string[] = [];
  let bytes = 0;
  let files = 0;
  await inParallel(withFiles, async (row) => {
    const rel = spoolEntryPath(row.spool_path);
    let entry: ContentEntry;
    try {
      entry = await backUpFile(stateDir, to, rel, dirs);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      missing.push(row.id);
      return;
    }
    if (entry.size !== row.size_bytes) {
      // Emptied in place or cut short by retention: deleted after the snapshot.
      await rm(path.join(to, rel), { force: true });
      missing.push(row.id);
      return;
    }
    contents.push(entry);
    bytes += entry.size;
    files++;
  });
  await dirs.ensure(path.join(to, 'spool'));
  for (const extra of EXTRA_DIRS) if (existsSync(path.join(stateDir, extra))) await backUpTree(stateDir, to, extra, dirs, contents);
  for (const extra of EXTRA_FILES) if (existsSync(path.join(stateDir, extra))) contents.push(await backUpFile(stateDir, to, extra, dirs));

  const manifest: BackupManifest = {
    format: MANIFEST_FORMAT,
    created_at: new Date().toISOString(),
    messages: rows.length,
    files,
    bytes,
    bodies_in_index: rows.length - withFiles.length,
    missing,
    contents: contents.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)),
  };
  // The manifest last: it marks a finished backup.
  for (const dir of dirs.deepestFirst()) await flush(dir);
  await writeFile(path.join(to, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await flush(path.join(to, MANIFEST_FILE));
  await flush(to);
  const { contents: _listed, ...summary } = manifest;
  return { to, ...summary };
}

async function readManifest(from: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await readFile(path.join(from, MANIFEST_FILE), 'utf8');
  } catch {
    throw new OperatorError('invalid_argument', `${from} is not a finished Postern backup (no readable ${MANIFEST_FILE})`, 'from');
  }
  return parseManifest(text, from);
}

/** Absent, or empty but for killed restores' staging directories (removed). The first directory restore made, or null. */
async function claimStateDirectory(stateDir: string): Promise<string | null> {
  const entries = existsSync(stateDir) && statSync(stateDir).isDirectory() ? readdirSync(stateDir) : null;
  const stale = entries?.filter((name) => name.startsWith(STAGING_PREFIX)) ?? [];
  if (entries && entries.length > stale.length) {
    const interrupted = stale.length > 0 ? ` (an earlier restore was interrupted while it renamed files into place: empty it and restore again)` : '';
    throw new OperatorError('conflict', `the state directory ${stateDir} is not empty: restore only into an empty one (set state_dir or POSTERN_STATE_DIR to a new directory)${interrupted}`);
  }
  if (!entries && existsSync(stateDir)) throw new OperatorError('conflict', `the state directory ${stateDir} is not a directory`);
  const made = (await mkdir(stateDir, { recursive: true, mode: 0o700 })) ?? null;
  ensurePrivateDirectory(stateDir);
  for (const name of stale) {
    checkOwnEntry(path.join(stateDir, name), 'directory');
    await rm(path.join(stateDir, name), { recursive: true, force: true });
  }
  return made;
}

interface FileProblem {
  path: string;
  problem: string;
}

async function copyChecked(from: string, staging: string, manifest: BackupManifest): Promise<FileProblem[]> {
  const dirs = new Directories(staging);
  const problems: FileProblem[] = [];
  const report = (entry: ContentEntry, problem: string) => problems.push({ path: entry.path, problem: `${entry.path} ${problem}` });
  await inParallel(manifest.contents, async (entry) => {
    const source = path.join(from, entry.path);
    const target = path.join(staging, entry.path);
    let stats: Stats;
    try {
      stats = await lstat(source);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      report(entry, 'is listed in backup.json but is not in the backup');
      return;
    }
    if (!stats.isFile()) {
      report(entry, `in the backup is ${stats.isSymbolicLink() ? 'a symbolic link' : 'not a file'}; backup.json lists a file`);
      return;
    }
    if (stats.size !== entry.size) {
      report(entry, `is ${stats.size} bytes; backup.json says ${entry.size}`);
      return;
    }
    await dirs.ensure(path.dirname(target));
    await copyNew(source, target);
    // The copy itself is checked: what the restored server will read.
    const copied = await digestAndFlush(target);
    if (copied.size !== entry.size) report(entry, `is ${copied.size} bytes; backup.json says ${entry.size}`);
    else if (copied.sha256 !== entry.sha256) report(entry, `does not match backup.json: its SHA-256 is ${copied.sha256}, backup.json says ${entry.sha256}`);
  });
  for (const dir of dirs.deepestFirst()) await flush(dir);
  return problems.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function refusal(from: string, problems: string[]): OperatorError {
  const named = problems.slice(0, PROBLEMS_NAMED).join('; ');
  const more = problems.length > PROBLEMS_NAMED ? `; and ${problems.length - PROBLEMS_NAMED} more` : '';
  return new OperatorError('invalid_argument', `${from} does not hold what its backup.json says, so nothing was restored: ${named}${more}`, 'from');
}

async function moveIntoPlace(staging: string, stateDir: string): Promise<void> {
  const isIndex = (name: string) => name.startsWith(INDEX_FILE);
  const names = readdirSync(staging).sort((a, b) => Number(isIndex(a)) - Number(isIndex(b)));
  for (const name of names) await rename(path.join(staging, name), path.join(stateDir, name));
  await rmdir(staging);
  await flush(stateDir);
}

export async function restoreState(from: string, stateDir: string, logger: Logger): Promise<{ from: string; state_dir: string; messages: number; files: number; created_at: string }> {
  const manifest = await readManifest(from);
  const made = await claimStateDirectory(stateDir);
  const staging = await mkdtemp(path.join(stateDir, STAGING_PREFIX));
  try {
    const fileProblems = await copyChecked(from, staging, manifest);
    const problems = fileProblems.map((p) => p.problem);
    if (!fileProblems.some((p) => p.path === INDEX_FILE)) problems.push(...countProblems(manifest, spoolFilesOfCopy(path.join(staging, INDEX_FILE))));
    if (problems.length > 0) throw refusal(from, problems);
    const db = openDatabase(staging, logger);
    try {
      const check = quickCheck(db);
      if (check !== 'ok') throw new OperatorError('conflict', `the restored index fails its check: ${check}`);
    } finally {
      db.close();
    }
    await flush(staging);
    await moveIntoPlace(staging, stateDir);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    if (made !== null) await rm(made, { recursive: true, force: true });
    throw err;
  }
  const files = manifest.contents.filter((entry) => entry.path.startsWith('spool/')).length;
  return { from, state_dir: stateDir, messages: manifest.messages, files, created_at: manifest.created_at };
}
