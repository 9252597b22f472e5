/**
 * Worker-thread entry: composes messages' MIME and writes each under its temp name.
 * MailComposer is CPU-heavy; it stays off the event loop that serves HTTP. Making the files
 * durable under their final names is the index writer's, once per commit group.
 */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { composeMime } from '../accept/composeMime.js';
import type { OutgoingMessage } from '../accept/outgoingMessage.js';

export interface WriteTask {
  seq: number;
  id: string;
  message: OutgoingMessage;
  dateMs: number;
  tmpPath: string;
}

export type WriteResult = { seq: number; ok: true; size: number } | { seq: number; ok: false; error: string };

function writeTemp(tmpPath: string, data: Uint8Array): void {
  const fd = openSync(tmpPath, 'wx', 0o600);
  try {
    for (let offset = 0; offset < data.length; ) offset += writeSync(fd, data, offset, data.length - offset);
  } finally {
    closeSync(fd);
  }
}

/** Buffers arrive as plain Uint8Arrays after structured cloning. */
function revive(message: OutgoingMessage): OutgoingMessage {
  return { ...message, attachments: message.attachments.map((a) => ({ ...a, content: Buffer.from(a.content.buffer, a.content.byteOffset, a.content.byteLength) })) };
}

let results: WriteResult[] = [];

/** Results of one tick go back in one message, like the tasks came. */
function reply(result: WriteResult): void {
  if (results.length === 0) {
    setImmediate(() => {
      const batch = results;
      results = [];
      parentPort!.postMessage(batch);
    });
  }
  results.push(result);
}

function handle(task: WriteTask): void {
  composeMime(task.id, revive(task.message), new Date(task.dateMs))
    .then((mime) => {
      writeTemp(task.tmpPath, mime);
      reply({ seq: task.seq, ok: true, size: mime.length });
    })
    .catch((err: unknown) => {
      rmSync(task.tmpPath, { force: true });
      reply({ seq: task.seq, ok: false, error: (err as Error).message });
    });
}

parentPort?.on('message', (tasks: WriteTask[]) => {
  for (const task of tasks) handle(task);
});
