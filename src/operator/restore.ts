/**
 * `postern restore` (docs/operations.md#backup-and-restore). Restore stages in the
 * state directory (same filesystem: atomic renames) and changes nothing until everything checks.
 */
import { existsSync, readdirSync, type Stats, statSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readFile, rename, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../log.js';
import { checkOwnEntry, ensurePrivateDirectory } from '../platform/privateFiles.js';
import { INDEX_FILE, quickCheck, spoolFilesOfCopy } from '../store/backup.js';
import { openDatabase } from '../store/db.js';
import { copyNew, Directories, digestAndFlush, flush, inParallel } from './backupFiles.js';
import {
  type BackupManifest,
  type ContentEntry,
  countProblems,
  MANIFEST_FILE,
  parseManifest,
} from './backupManifest.js';
import { OperatorError } from './errors.js';

/** '.': never a name a backup holds. */
const STAGING_PREFIX = '.restore-';
const PROBLEMS_NAMED = 5;

async function readManifest(from: string): Promise<BackupManifest> {
  let text: string;
  try {
    text = await readFile(path.join(from, MANIFEST_FILE), 'utf8');
  } catch {
    throw new OperatorError(
      'invalid_argument',
      `${from} is not a finished Postern backup (no readable ${MANIFEST_FILE})`,
      'from',
    );
  }
  return parseManifest(text, from);
}

/** Absent, or empty but for killed restores' staging directories (removed). The first directory restore made, or null. */
async function claimStateDirectory(stateDir: string): Promise<string | null> {
  const entries =
    existsSync(stateDir) && statSync(stateDir).isDirectory() ? readdirSync(stateDir) : null;
  const stale = entries?.filter((name) => name.startsWith(STAGING_PREFIX)) ?? [];
  if (entries && entries.length > stale.length) {
    const interrupted =
      stale.length > 0
        ? ` (an earlier restore was interrupted while it renamed files into place: empty it and restore again)`
        : '';
    throw new OperatorError(
      'conflict',
      `the state directory ${stateDir} is not empty: restore only into an empty one (set state_dir or POSTERN_STATE_DIR to a new directory)${interrupted}`,
    );
  }
  if (!entries && existsSync(stateDir))
    throw new OperatorError('conflict', `the state directory ${stateDir} is not a directory`);
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

async function copyChecked(
  from: string,
  staging: string,
  manifest: BackupManifest,
): Promise<FileProblem[]> {
  const dirs = new Directories(staging);
  const problems: FileProblem[] = [];
  const report = (entry: ContentEntry, problem: string) =>
    problems.push({ path: entry.path, problem: `${entry.path} ${problem}` });
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
      report(
        entry,
        `in the backup is ${stats.isSymbolicLink() ? 'a symbolic link' : 'not a file'}; backup.json lists a file`,
      );
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
    if (copied.size !== entry.size)
      report(entry, `is ${copied.size} bytes; backup.json says ${entry.size}`);
    else if (copied.sha256 !== entry.sha256)
      report(
        entry,
        `does not match backup.json: its SHA-256 is ${copied.sha256}, backup.json says ${entry.sha256}`,
      );
  });
  for (const dir of dirs.deepestFirst()) await flush(dir);
  return problems.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

function refusal(from: string, problems: string[]): OperatorError {
  const named = problems.slice(0, PROBLEMS_NAMED).join('; ');
  const more =
    problems.length > PROBLEMS_NAMED ? `; and ${problems.length - PROBLEMS_NAMED} more` : '';
  return new OperatorError(
    'invalid_argument',
    `${from} does not hold what its backup.json says, so nothing was restored: ${named}${more}`,
    'from',
  );
}

async function moveIntoPlace(staging: string, stateDir: string): Promise<void> {
  const isIndex = (name: string) => name.startsWith(INDEX_FILE);
  const names = readdirSync(staging).sort((a, b) => Number(isIndex(a)) - Number(isIndex(b)));
  for (const name of names) await rename(path.join(staging, name), path.join(stateDir, name));
  await rmdir(staging);
  await flush(stateDir);
}

export async function restoreState(
  from: string,
  stateDir: string,
  logger: Logger,
): Promise<{
  from: string;
  state_dir: string;
  messages: number;
  files: number;
  created_at: string;
}> {
  const manifest = await readManifest(from);
  const made = await claimStateDirectory(stateDir);
  const staging = await mkdtemp(path.join(stateDir, STAGING_PREFIX));
  try {
    const fileProblems = await copyChecked(from, staging, manifest);
    const problems = fileProblems.map((p) => p.problem);
    if (!fileProblems.some((p) => p.path === INDEX_FILE))
      problems.push(...countProblems(manifest, spoolFilesOfCopy(path.join(staging, INDEX_FILE))));
    if (problems.length > 0) throw refusal(from, problems);
    const db = openDatabase(staging, logger);
    try {
      const check = quickCheck(db);
      if (check !== 'ok')
        throw new OperatorError('conflict', `the restored index fails its check: ${check}`);
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
  return {
    from,
    state_dir: stateDir,
    messages: manifest.messages,
    files,
    created_at: manifest.created_at,
  };
}
