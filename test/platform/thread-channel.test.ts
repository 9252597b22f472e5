/**
 * The one request/reply channel every worker thread is reached through (src/platform/threadChannel.ts):
 * real threads and real MessagePorts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MessageChannel, Worker } from 'node:worker_threads';
import { type ChannelReply, ThreadChannel } from '../../src/platform/threadChannel.js';

type Echo = ChannelReply & { value?: string };

/** Answers each batch in reverse order; a request for "fail" gets an error reply, "exit" ends the thread. */
const echoThread = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', (requests) => {
  if (requests.some((r) => r.value === 'exit')) process.exit(3);
  parentPort.postMessage(requests.reverse().map((r) => r.value === 'fail' ? { seq: r.seq, ok: false, error: 'refused ' + r.seq } : { seq: r.seq, ok: true, value: r.value.toUpperCase() }));
});
`;

test('each reply settles the request it names, and an error reply fails that request alone', async (t) => {
  const worker = new Worker(echoThread, { eval: true });
  t.after(() => worker.terminate());
  const channel = new ThreadChannel<Echo>(worker, { name: 'echo' });
  const [a, b, c] = channel.request([
    { seq: 1, value: 'one' },
    { seq: 2, value: 'fail' },
    { seq: 3, value: 'three' },
  ]);
  assert.equal(channel.waiting, 3);
  assert.equal((await a).value, 'ONE');
  await assert.rejects(b, { message: 'refused 2' });
  assert.equal((await c).value, 'THREE');
  assert.equal(channel.waiting, 0);
});

test('a thread that exits fails every request still waiting, and every later one at once', async (t) => {
  const worker = new Worker(echoThread, { eval: true });
  t.after(() => worker.terminate());
  const channel = new ThreadChannel<Echo>(worker, { name: 'echo writer' });
  const [answered] = channel.request([{ seq: 1, value: 'first' }]);
  assert.equal((await answered).value, 'FIRST');
  const waiting = channel.expect(2);
  channel.post([{ seq: 3, value: 'exit' }]);
  await assert.rejects(waiting, { message: 'echo writer exited with code 3' });
  assert.equal(channel.waiting, 0);
  await assert.rejects(channel.expect(4), { message: 'echo writer exited with code 3' });
});

test('a port whose other end closes fails what waits on it; closing the channel does the same', async () => {
  const { port1, port2 } = new MessageChannel();
  const channel = new ThreadChannel<Echo>(port1, { name: 'bookkeeping', refWhileWaiting: true });
  const [unanswered] = channel.request([{ seq: 1 }]);
  port2.close();
  await assert.rejects(unanswered, { message: 'bookkeeping channel closed' });

  const other = new MessageChannel();
  const closing = new ThreadChannel<Echo>(other.port1, {
    name: 'bookkeeping',
    refWhileWaiting: true,
  });
  const [pending] = closing.request([{ seq: 1 }]);
  closing.close();
  await assert.rejects(pending, { message: 'bookkeeping channel closed' });
  other.port2.close();
});
