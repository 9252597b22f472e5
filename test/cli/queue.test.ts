/**
 * The queue tools (issue 21): `postern queue summary` (counts by status and by age, like
 * qshape; `--json` one object) and the bulk `--filter` forms of `message release|cancel|retry`,
 * which run the console's bulk-action code.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  createProjectWithKeys,
  post,
  runCli,
  startTestPostern,
  validMessage,
} from '../support/postern.js';
import { scope } from '../support/waiting.js';

test('queue summary counts messages by status and age; message cancel --filter cancels what the filter matches, and the summary shows it', async (t) => {
  const s = scope(t);
  const p = s.add(await startTestPostern(), (x) => x.close());
  const pk = await createProjectWithKeys(p.ctx, 'queue');
  const other = await createProjectWithKeys(p.ctx, 'other');
  for (let i = 0; i < 3; i++)
    assert.equal(
      (await post(p.production, '/v1/send', { key: pk.liveKey, json: validMessage() })).status,
      202,
    );
  assert.equal(
    (await post(p.production, '/v1/send', { key: other.liveKey, json: validMessage() })).status,
    202,
  );
  assert.equal(
    (await post(p.sandbox, '/v1/send', { key: pk.testKey, json: validMessage() })).status,
    202,
  );
  const env = { POSTERN_STATE_DIR: p.stateDir };

  const summary = await runCli(['queue', 'summary', '--json'], env);
  assert.equal(summary.code, 0, summary.stderr);
  assert.deepEqual(Object.keys(summary.json).sort(), [
    'by_age',
    'by_provider',
    'by_status',
    'generated_at',
    'oldest_waiting',
  ]);
  assert.equal(summary.json.by_status.queued, 4);
  assert.equal(summary.json.by_status.captured, 1);
  assert.equal(summary.json.by_status.cancelled, 0);
  assert.deepEqual(summary.json.by_age.queued, {
    '0-5m': 4,
    '5-10m': 0,
    '10-20m': 0,
    '20-40m': 0,
    '40-80m': 0,
    '80-160m': 0,
    '160m+': 0,
  });
  assert.deepEqual(summary.json.by_provider, {});
  assert.match(summary.json.oldest_waiting.id, /^m\./);

  const table = await runCli(['queue', 'summary'], env);
  assert.equal(table.code, 0);
  assert.match(
    table.stdout,
    /^status\s+total\s+0-5m\s+5-10m\s+10-20m\s+20-40m\s+40-80m\s+80-160m\s+160m\+\nqueued\s+4\s+4\s+0/,
  );

  const cancelled = await runCli(
    [
      'message',
      'cancel',
      '--filter',
      `project=${pk.project.id}`,
      '--filter',
      'status=queued',
      '--json',
    ],
    env,
  );
  assert.equal(cancelled.code, 0, cancelled.stderr);
  assert.deepEqual(cancelled.json, {
    action: 'cancel',
    matched: 3,
    changed: 3,
    skipped: 0,
    not_found: 0,
  });
  const after = await runCli(['queue', 'summary', '--json'], env);
  assert.deepEqual(
    [after.json.by_status.queued, after.json.by_status.cancelled, after.json.by_status.captured],
    [1, 3, 1],
  );

  // The single form is unchanged, and a filter it does not know is refused.
  const one = await runCli(['message', 'cancel', after.json.oldest_waiting.id, '--json'], env);
  assert.equal(one.code, 0, one.stderr);
  const bad = await runCli(['message', 'release', '--filter', 'colour=blue', '--json'], env);
  assert.equal(bad.code, 1);
  assert.equal(bad.json.error.code, 'invalid_argument');
  const neither = await runCli(['message', 'retry', '--json'], env);
  assert.equal(neither.code, 2);
});
