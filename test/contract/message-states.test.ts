/**
 * The transition table (src/contract/messageStates.ts) pinned pair by pair: every (from, to) of
 * the twelve statuses is allowed by exactly the causes written below, and refused by every
 * other. The list is written out again here on purpose: a change to the lifecycle has to be
 * made twice, here and in the table, and shows in docs/architecture.md (regenerated). Whether
 * the writers do what the table says is test/delivery/message-state-writers.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import {
  ACCEPTANCE,
  allows,
  CAUSES,
  type Cause,
  FINISHED_STATUSES,
  fromStatuses,
  initialStatus,
  LIVE_STATUSES,
  MESSAGE_STATUSES,
  type MessageStatus,
  REMOVALS,
  removableFrom,
  TRANSITIONS,
  type TransitionCause,
} from '../../src/contract/messageStates.js';
import { repoRoot } from '../support/paths.js';

/** Every allowed move, as the lifecycle is meant to be. Any pair and cause not here is refused. */
const EXPECTED: [from: MessageStatus, to: MessageStatus, cause: TransitionCause][] = [
  ['paused', 'queued', 'release'],
  ['paused', 'scheduled', 'release'],
  ['captured', 'queued', 'release'],
  ['captured', 'scheduled', 'release'],
  ['queued', 'cancelled', 'cancel'],
  ['scheduled', 'cancelled', 'cancel'],
  ['paused', 'cancelled', 'cancel'],
  ['captured', 'cancelled', 'cancel'],
  ['queued', 'queued', 'retry'],
  ['paused', 'queued', 'project_resume'],
  ['paused', 'scheduled', 'project_resume'],
  ['captured', 'captured', 'project_resume'],
  ['queued', 'sending', 'lease'],
  ['scheduled', 'sending', 'lease'],
  ['sending', 'sending', 'lease_expired'],
  ['sending', 'sending', 'lease_reclaimed'],
  ['sending', 'sent', 'hand_off'],
  ['sending', 'queued', 'hand_off'],
  ['sending', 'failed', 'hand_off'],
  ['sending', 'suppressed', 'hand_off'],
  ['queued', 'failed', 'expire'],
  ['scheduled', 'failed', 'expire'],
  ['paused', 'failed', 'expire'],
  ['captured', 'failed', 'expire'],
  ['sent', 'delivered', 'provider_feedback'],
  ['sent', 'failed', 'provider_feedback'],
  ['sent', 'bounced', 'provider_feedback'],
  ['sent', 'complained', 'provider_feedback'],
  ['delivered', 'failed', 'provider_feedback'],
  ['delivered', 'bounced', 'provider_feedback'],
  ['delivered', 'complained', 'provider_feedback'],
  ['failed', 'bounced', 'provider_feedback'],
  ['failed', 'complained', 'provider_feedback'],
  ['bounced', 'complained', 'provider_feedback'],
  ['queued', 'failed', 'spool_file_missing'],
  ['scheduled', 'failed', 'spool_file_missing'],
  ['paused', 'failed', 'spool_file_missing'],
  ['captured', 'failed', 'spool_file_missing'],
  ['sending', 'failed', 'spool_file_missing'],
];

const TRANSITION_CAUSES = [...new Set(TRANSITIONS.map((t) => t.cause))];
const contract = JSON.parse(readFileSync(path.join(repoRoot, 'src/contract/openapi.json'), 'utf8'));
const consoleApi = JSON.parse(
  readFileSync(path.join(repoRoot, 'src/console/openapi.json'), 'utf8'),
);

/** The statuses reachable from `start` by the table's moves (start included). */
function reachable(start: MessageStatus): Set<MessageStatus> {
  const seen = new Set<MessageStatus>([start]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const t of TRANSITIONS) {
      if (seen.has(t.from) && !seen.has(t.to)) {
        seen.add(t.to);
        grew = true;
      }
    }
  }
  return seen;
}

describe('the message transition table', () => {
  test('every (from, to) pair of the twelve statuses: allowed by exactly its causes, refused by every other', () => {
    const wrong: string[] = [];
    let allowedPairs = 0;
    for (const from of MESSAGE_STATUSES) {
      for (const to of MESSAGE_STATUSES) {
        const expected = EXPECTED.filter(([f, t]) => f === from && t === to)
          .map(([, , c]) => c)
          .sort();
        const inTable = TRANSITIONS.filter((t) => t.from === from && t.to === to)
          .map((t) => t.cause)
          .sort();
        if (expected.join() !== inTable.join())
          wrong.push(`${from} → ${to}: expected [${expected}], the table says [${inTable}]`);
        for (const cause of Object.keys(CAUSES) as Cause[]) {
          if (allows(cause, from, to) !== expected.includes(cause as TransitionCause))
            wrong.push(`allows(${cause}, ${from}, ${to}) is ${allows(cause, from, to)}`);
        }
        if (expected.length > 0) allowedPairs++;
      }
    }
    assert.deepEqual(wrong, []);
    assert.equal(MESSAGE_STATUSES.length * MESSAGE_STATUSES.length, 144);
    assert.equal(
      allowedPairs,
      31,
      'pairs allowed by at least one cause (the other 113 are refused)',
    );
    assert.equal(TRANSITIONS.length, EXPECTED.length, 'no row twice');
  });

  test('each cause names who moves the message and why; each row a known cause, every cause used', () => {
    for (const [cause, info] of Object.entries(CAUSES)) {
      assert.ok(info.by.length > 0 && info.says.length > 0, cause);
    }
    const used = new Set<string>([
      ...TRANSITIONS.map((t) => t.cause),
      ...REMOVALS.map((r) => r.cause),
    ]);
    assert.deepEqual([...used].sort(), Object.keys(CAUSES).sort());
  });

  test("fromStatuses: the guard lists, in the console's order of statuses; a move the table does not have is an error, not an empty guard", () => {
    assert.deepEqual(fromStatuses('release'), ['paused', 'captured']);
    assert.deepEqual(fromStatuses('cancel', 'cancelled'), [
      'queued',
      'scheduled',
      'paused',
      'captured',
    ]);
    assert.deepEqual(fromStatuses('retry', 'queued'), ['queued']);
    assert.deepEqual(fromStatuses('project_resume'), ['paused', 'captured']);
    assert.deepEqual(fromStatuses('project_resume', 'captured'), ['captured']);
    assert.deepEqual(fromStatuses('lease', 'sending'), ['queued', 'scheduled']);
    assert.deepEqual(fromStatuses('lease_expired', 'sending'), ['sending']);
    assert.deepEqual(fromStatuses('lease_reclaimed', 'sending'), ['sending']);
    assert.deepEqual(fromStatuses('expire', 'failed'), [
      'queued',
      'scheduled',
      'paused',
      'captured',
    ]);
    assert.deepEqual(fromStatuses('provider_feedback', 'delivered'), ['sent']);
    assert.deepEqual(fromStatuses('provider_feedback', 'failed'), ['sent', 'delivered']);
    assert.deepEqual(fromStatuses('provider_feedback', 'bounced'), ['sent', 'delivered', 'failed']);
    assert.deepEqual(fromStatuses('provider_feedback', 'complained'), [
      'sent',
      'delivered',
      'bounced',
      'failed',
    ]);
    for (const to of ['sent', 'queued', 'failed', 'suppressed'] as const)
      assert.deepEqual(fromStatuses('hand_off', to), ['sending']);
    assert.deepEqual(fromStatuses('spool_file_missing', 'failed'), [...LIVE_STATUSES]);
    assert.throws(() => fromStatuses('cancel', 'queued'), /no transition by cancel to queued/);
    for (const cause of TRANSITION_CAUSES) {
      const list = fromStatuses(cause);
      assert.deepEqual(
        list,
        MESSAGE_STATUSES.filter((s) => list.includes(s)),
        `${cause}: in MESSAGE_STATUSES order`,
      );
    }
  });

  test("acceptance: the contract's four statuses, by precedence sandbox > held > scheduled > queued", () => {
    assert.deepEqual(
      ACCEPTANCE.map((a) => a.to).sort(),
      [...contract.components.schemas.Status.enum].sort(),
    );
    for (const sandbox of [false, true]) {
      for (const held of [false, true]) {
        for (const scheduled of [false, true]) {
          const expected = sandbox
            ? 'captured'
            : held
              ? 'paused'
              : scheduled
                ? 'scheduled'
                : 'queued';
          assert.equal(
            initialStatus({ sandbox, held, scheduled }),
            expected,
            JSON.stringify({ sandbox, held, scheduled }),
          );
        }
      }
    }
  });

  test("the statuses are the console API's MessageStatus, in its order", () => {
    assert.deepEqual([...MESSAGE_STATUSES], consoleApi.components.schemas.MessageStatus.enum);
  });

  test('live and finished: a live status can still reach a hand-off, a finished one never moves back to a live one; retention removes only finished, delete only captured', () => {
    assert.deepEqual([...LIVE_STATUSES, ...FINISHED_STATUSES].sort(), [...MESSAGE_STATUSES].sort());
    for (const s of LIVE_STATUSES) assert.ok(reachable(s).has('sending'), `${s} can reach sending`);
    for (const s of FINISHED_STATUSES) {
      const back = [...reachable(s)].filter((r) =>
        (LIVE_STATUSES as readonly string[]).includes(r),
      );
      assert.deepEqual(back, [], `${s} never becomes live again`);
    }
    assert.deepEqual(removableFrom('retention'), FINISHED_STATUSES);
    assert.deepEqual(removableFrom('delete'), ['captured']);
    // Every status is reachable from one a message starts in.
    const fromAcceptance = new Set(ACCEPTANCE.flatMap((a) => [...reachable(a.to)]));
    assert.deepEqual(
      MESSAGE_STATUSES.filter((s) => !fromAcceptance.has(s)),
      [],
    );
  });

  test('docs/architecture.md draws the states from the table (npm run gen:states)', () => {
    const run = spawnSync(
      process.execPath,
      [path.join(repoRoot, 'scripts/generate-state-diagram.mjs'), '--check'],
      { encoding: 'utf8' },
    );
    assert.equal(run.status, 0, run.stderr);
  });
});
