/**
 * Worker-thread entry: composes a message's MIME and writes it durably (temp → fsync → rename).
 * MailComposer is CPU-heavy and fsync blocks; both stay off the event loop that serves HTTP.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import { composeMime } from '../accept/composeMime.js';
import type { OutgoingMessage } from '../accept/outgoingMessage.js';
import { syncDirectorySync } from './spool.js';

export interface WriteTask {
  seq: number;
  id: string;
  message: OutgoingMessage;
  dateMs: number;
  tmpPath: string;
  finalPath: string;
  spoolRoot: string;
}

export type WriteResult = { seq: number; ok: true; size: number } | { seq: number; ok: false; error: string };

const knownDirs = new Set<string>();

function writeDurably(tmpPath: string, finalPath: string, spoolRoot: string, data: Uint8Array): void {
  const dir = path.dirname(finalPath);
  if (!knownDirs.has(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    syncDirectorySync(spoolRoot); // the day directory's own entry
    knownDirs.add(dir);
  }
  const fd = openSync(tmpPath, 'wx', 0o600);
  try {
    for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset, data.length - offset);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmpPath, finalPath);
}

/** Buffers arrive as plain Uint8Arrays after structured cloning. */
function revive(message: OutgoingMessage): OutgoingMessage {
  return { ...message, attachments: message.attachments.map((a) => ({ ...a, content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength) })) };
}

parentPort?.on('message', (task: WriteTask) => {
  composeMime(task.id, revive(task.message), new Date(task.dateMs))
    .then((mime) => {
      writeDurably(task.tmpPath, task.finalPath, task.spoolRoot, mime);
      parentPort!.postMessage({ seq: task.seq, ok: true, size: mime.length } satisfies WriteResult);
    })
    .catch((err: unknown) => {
      rmSync(task.tmpPath, { force: true });
      parentPort!.postMessage({ seq: task.seq, ok: false, error: (err as Error).message } satisfies WriteResult);
    });
});
