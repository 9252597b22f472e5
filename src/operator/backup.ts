/** `postern backup` (docs/operations.md#backup-and-restore). */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.js';
import {
  checkOwnEntry,
  ensurePrivateDirectory,
  ensurePrivateFile,
  StateFileError,
} from '../platform/privateFiles.js';
import { VIEWER_KEY_FILE } from '../policy/viewerKey.js';
import { backupIndex, INDEX_FILE, spoolFilesOfCopy } from '../store/backup.js';
import { openDatabase } from '../store/db.js';
import { BODY_IN_INDEX } from '../store/messageBodies.js';
import { copyNew, Directories, digestAndFlush, flush, inParallel } from './backupFiles.js';
import {
  type BackupManifest,
  type ContentEntry,
  MANIFEST_FILE,
  MANIFEST_FORMAT,
  spoolEntryPath,
} from './backupManifest.js';
import { OperatorError } from './errors.js';

/** Besides the index and the spool: the self-signed SMTP certificate pair. */
const EXTRA_DIRS = ['certs'];
/** Without it, every viewer link handed out stops opening. */
const EXTRA_FILES = [VIEWER_KEY_FILE];

export type BackupSummary = Omit<BackupManifest, 'contents'> & { to: string };

function isEmptyOrAbsent(dir: string): boolean {
  return !existsSync(dir) || (statSync(dir).isDirectory() && readdirSync(dir).length === 0);
}

async function backUpFile(
  stateDir: string,
  to: string,
  rel: string,
  dirs: Directories,
): Promise<ContentEntry> {
  checkOwnEntry(path.join(stateDir, rel), 'file');
  await dirs.ensure(path.dirname(path.join(to, rel)));
  await copyNew(path.join(stateDir, rel), path.join(to, rel));
  return { path: rel.split(path.sep).join('/'), ...(await digestAndFlush(path.join(to, rel))) };
}

async function backUpTree(
  stateDir: string,
  to: string,
  rel: string,
  dirs: Directories,
  contents: ContentEntry[],
): Promise<void> {
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
    if (err instanceof StateFileError)
      throw new OperatorError(
        'invalid_argument',
        `${to} cannot hold a backup: ${err.message}`,
        'to',
      );
    throw err;
  }
}

export async function backupState(
  stateDir: string,
  to: string,
  logger: Logger,
): Promise<BackupSummary> {
  if (!existsSync(path.join(stateDir, INDEX_FILE)))
    throw new OperatorError('not_found', `no index in ${stateDir}: nothing to back up`);
  if (!isEmptyOrAbsent(to))
    throw new OperatorError(
      'conflict',
      `${to} is not empty: back up into a new or empty directory`,
    );
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
  for (const extra of EXTRA_DIRS)
    if (existsSync(path.join(stateDir, extra)))
      await backUpTree(stateDir, to, extra, dirs, contents);
  for (const extra of EXTRA_FILES)
    if (existsSync(path.join(stateDir, extra)))
      contents.push(await backUpFile(stateDir, to, extra, dirs));

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
  await writeFile(path.join(to, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`, {
    mode: 0o600,
    flag: 'wx',
  });
  await flush(path.join(to, MANIFEST_FILE));
  await flush(to);
  const { contents: _listed, ...summary } = manifest;
  return { to, ...summary };
}
