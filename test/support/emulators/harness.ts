/**
 * What the provider API suites share: an in-process Postern with
 * delivery on, a send over real HTTP, and reading back what became of the message.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { ManualClock } from '../../../src/clock.js';
import { messageShow } from '../../../src/operator/messages.js';
import {
  type AttachOptions,
  attachProvider,
  type ProviderAccountView,
} from '../../../src/operator/providers.js';
import { suppressionList } from '../../../src/operator/suppressions.js';
import { eventsForMessage } from '../../../src/store/events.js';
import { assertAccepted } from '../assertions.js';
import {
  createProjectWithKeys,
  type ProjectWithKeys,
  post,
  repoRoot,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../postern.js';
import { schedulerProbe } from '../probes.js';
import type { ProviderEmulator } from '../providerEmulator.js';
import { HANG_GUARD_MS, scope, waitFor } from '../waiting.js';

type Scope = ReturnType<typeof scope>;

/** Postern with delivery on (20 ms polls, a 60 s ladder unless told otherwise), closed after the test. */
export async function deliveringPostern(
  s: Scope,
  clock?: ManualClock,
  delivery: Record<string, unknown> = {},
): Promise<TestPostern> {
  const p = await startTestPostern({
    clock,
    config: {
      delivery: { enabled: true, poll_interval_ms: 20, retry_ladder_seconds: [60], ...delivery },
    },
  });
  return s.add(p, (x) => x.close());
}

/** `POST /v1/send` with the project's live key; the message id. */
export async function sendOver(
  p: TestPostern,
  pk: ProjectWithKeys,
  overrides: Record<string, unknown> = {},
  status = 'queued',
): Promise<string> {
  const res = await post(p.production, '/v1/send', {
    key: pk.liveKey,
    json: validMessage(overrides),
  });
  assertAccepted(res, status);
  return res.body.id as string;
}

export async function statusReached(p: TestPostern, id: string, status: string) {
  await waitFor(
    async () => (await messageShow(p.ctx, id)).status === status,
    HANG_GUARD_MS,
    `${id} to be ${status} (is ${(await messageShow(p.ctx, id)).status})`,
  );
  return messageShow(p.ctx, id);
}

/** The message's event types, in order. */
export const eventTypes = async (p: TestPostern, id: string) =>
  (await eventsForMessage(p.ctx.store, id)).map((e) => e.type);

/** [account id, outcome] of each attempt. */
export const attemptOutcomes = async (p: TestPostern, id: string) =>
  (await messageShow(p.ctx, id)).attempts_log.map((a) => [a.provider_account_id, a.outcome]);

/** The data of a message's first event of `type`, parsed. */
export const eventData = async (p: TestPostern, id: string, type: string) =>
  JSON.parse((await eventsForMessage(p.ctx.store, id)).find((e) => e.type === type)!.data);

/** The project's suppressions as [email, reason], in the order listed. */
export const suppressions = async (p: TestPostern, pk: ProjectWithKeys) =>
  (await suppressionList(p.ctx, pk.project.id)).suppressions.map((x) => [x.email, x.reason]);

/** Everything feedback can change: events, the project's suppressions, the recipients' outcomes, the status. */
export async function feedbackState(p: TestPostern, pk: ProjectWithKeys, id: string) {
  const shown = await messageShow(p.ctx, id);
  return {
    status: shown.status,
    events: await eventTypes(p, id),
    suppressions: (await suppressions(p, pk)).sort(),
    outcomes: shown.recipient_outcomes,
  };
}

/** The JSON body of the emulator's `i`-th request. */
export const requestJson = (emu: ProviderEmulator, i: number) =>
  JSON.parse(emu.requests[i].body.toString('utf8'));

/**
 * A suite's way to attach its slug: an account with `settings`, its endpoint the given
 * emulator, and per call any option overridden.
 */
export function attacherFor(slug: string, settings: Omit<AttachOptions, 'slug' | 'endpoint'>) {
  return (
    p: TestPostern,
    pk: ProjectWithKeys,
    emu: { url: string },
    opts: Partial<AttachOptions> = {},
  ) => attachProvider(p.ctx, pk.project.id, { slug, ...settings, endpoint: emu.url, ...opts });
}

/** An emulator started for one test, closed with the test's scope. */
export async function startedFor<E extends { close(): Promise<unknown> | unknown }>(
  s: Scope,
  starting: Promise<E>,
): Promise<E> {
  return s.add(await starting, (e) => e.close());
}

/** A provider's documented sample, `test/fixtures/providers/<letter>/<file>`. */
export const providerFixture = (letter: string, file: string) =>
  readFileSync(path.join(repoRoot, 'test', 'fixtures', 'providers', letter, file), 'utf8');

/** A documented webhook sample (`<name>.json`) with every `{{placeholder}}` filled from `values`, each written as `write` gives it. */
export function filledFixture(
  letter: string,
  name: string,
  values: Record<string, string | number>,
  write: (value: string | number) => string = String,
): string {
  return providerFixture(letter, `${name}.json`).replace(/\{\{(\w+)\}\}/g, (_, k: string) => {
    if (!(k in values)) throw new Error(`fixture ${name} needs {{${k}}}`);
    return write(values[k]);
  });
}

/* Scenarios every API provider runs -------------------------------------------------------- */

export const T0 = Date.parse('2026-03-02T10:00:00.000Z');

/** How a suite starts its provider's emulator and attaches an account to it. */
export interface ApiKit<E extends ProviderEmulator> {
  start(s: Scope): Promise<E>;
  attach(
    p: TestPostern,
    pk: ProjectWithKeys,
    emu: E,
    opts?: Partial<AttachOptions>,
  ): Promise<ProviderAccountView>;
  /** The provider id the emulator gives the first message it accepts. */
  firstId: string;
}

/**
 * Two accounts of the provider: the first answers as `arrange` scripts it (returning attach
 * options, e.g. a wrong key), the second takes the message in the same hand-off.
 */
export async function failsOverToSecond<E extends ProviderEmulator>(
  t: TestContext,
  kit: ApiKit<E>,
  arrange: (first: E) => Partial<AttachOptions> | void,
  outcome: string,
) {
  const s = scope(t);
  const first = await kit.start(s);
  const second = await kit.start(s);
  const opts = arrange(first) ?? {};
  const p = await deliveringPostern(s, new ManualClock(T0));
  const pk = await createProjectWithKeys(p.ctx, 'failover', 'pro', { provider: false });
  const a1 = await kit.attach(p, pk, first, { priority: '1', ...opts });
  const a2 = await kit.attach(p, pk, second, { priority: '2' });
  const id = await sendOver(p, pk);
  const shown = await statusReached(p, id, 'sent');
  assert.deepEqual(await attemptOutcomes(p, id), [
    [a1.id, outcome],
    [a2.id, 'sent'],
  ]);
  assert.equal(shown.attempts, 1, 'one hand-off: no retry wait');
  assert.equal(shown.provider_message_id, kit.firstId);
  assert.equal(first.requests.length, 1);
  assert.equal(second.requests.length, 1);
}

/** The first account refuses the message itself: it fails, the second account never sees it. Its last error. */
export async function failsWithoutFailover<E extends ProviderEmulator>(
  t: TestContext,
  kit: Pick<ApiKit<E>, 'start' | 'attach'>,
): Promise<string | null> {
  const s = scope(t);
  const first = await kit.start(s);
  const second = await kit.start(s);
  first.behave('reject');
  const p = await deliveringPostern(s, new ManualClock(T0));
  const pk = await createProjectWithKeys(p.ctx, 'reject', 'pro', { provider: false });
  const a1 = await kit.attach(p, pk, first, { priority: '1' });
  await kit.attach(p, pk, second, { priority: '2' });
  const id = await sendOver(p, pk);
  const shown = await statusReached(p, id, 'failed');
  assert.deepEqual(await attemptOutcomes(p, id), [[a1.id, 'permanent']]);
  assert.equal(second.requests.length, 0);
  assert.deepEqual(await eventTypes(p, id), ['mail.accepted', 'mail.failed']);
  return shown.last_error;
}

/**
 * Two accounts; the first throttles once, saying when to come back (`resetMs`): the second
 * takes that message at once, takes the next one too without a request to the first (it is
 * resting), and after the reset the first is tried again and takes a third. The throttled reply.
 */
export async function restsThrottledAccount<E extends ProviderEmulator>(
  t: TestContext,
  kit: Pick<ApiKit<E>, 'attach'>,
  throttling: (s: Scope) => Promise<E>,
  spareOne: (s: Scope) => Promise<E>,
  resetMs: number,
): Promise<string | null> {
  const s = scope(t);
  const clock = new ManualClock(T0);
  const throttled = await throttling(s);
  const spare = await spareOne(s);
  const p = await deliveringPostern(s, clock);
  const pk = await createProjectWithKeys(p.ctx, 'throttle', 'pro', { provider: false });
  const a = await kit.attach(p, pk, throttled, { priority: '1' });
  const b = await kit.attach(p, pk, spare, { priority: '2' });
  throttled.behave('throttle', 1);

  const first = await sendOver(p, pk);
  await statusReached(p, first, 'sent');
  assert.deepEqual(await attemptOutcomes(p, first), [
    [a.id, 'temporary'],
    [b.id, 'sent'],
  ]);
  // Within the reset window the throttled account is skipped without a request.
  const second = await sendOver(p, pk);
  await statusReached(p, second, 'sent');
  assert.deepEqual(await attemptOutcomes(p, second), [[b.id, 'sent']]);
  assert.equal(throttled.requests.length, 1);

  clock.advance(resetMs);
  const third = await sendOver(p, pk);
  await statusReached(p, third, 'sent');
  assert.deepEqual(await attemptOutcomes(p, third), [[a.id, 'sent']]);
  assert.equal(throttled.requests.length, 2);
  return (await messageShow(p.ctx, first)).attempts_log[0].reply;
}

/**
 * The only account throttles once, saying when to come back (`waitMs` from T0): the retry
 * waits for that, not for the ladder's 10 s, and then sends. The first attempt's error.
 */
export async function retryWaitsForReset<E extends ProviderEmulator>(
  t: TestContext,
  kit: Pick<ApiKit<E>, 'attach'>,
  throttling: (s: Scope, clock: ManualClock) => Promise<E>,
  waitMs: number,
): Promise<string | null> {
  const s = scope(t);
  const clock = new ManualClock(T0);
  const emu = await throttling(s, clock);
  emu.behave('throttle');
  const p = await deliveringPostern(s, clock, { retry_ladder_seconds: [10] });
  const looked = await schedulerProbe(s, p);
  const pk = await createProjectWithKeys(p.ctx, 'reset', 'pro', { provider: false });
  await kit.attach(p, pk, emu);
  const id = await sendOver(p, pk);
  await waitFor(
    async () =>
      (await messageShow(p.ctx, id)).attempts_log.length === 1 &&
      (await messageShow(p.ctx, id)).status === 'queued',
    HANG_GUARD_MS,
    'first attempt',
  );
  const first = await messageShow(p.ctx, id);
  assert.equal(first.next_attempt_at, new Date(T0 + waitMs).toISOString());
  clock.advance(waitMs / 2);
  await looked();
  assert.equal(emu.requests.length, 1, 'nothing before the reset');
  assert.equal((await messageShow(p.ctx, id)).status, 'queued');
  clock.advance(waitMs / 2);
  const shown = await statusReached(p, id, 'sent');
  assert.equal(emu.requests.length, 2);
  assert.deepEqual(
    shown.attempts_log.map((a) => a.outcome),
    ['temporary', 'sent'],
  );
  return first.last_error;
}

/** Posts `body` with each set of headers; each is refused with its status and code, and nothing changes. */
export async function assertRefused(
  postIt: (
    body: string,
    headers: Record<string, string>,
  ) => Promise<{ status: number; body: any; text: string }>,
  body: string,
  cases: [Record<string, string>, number, string][],
  state: () => Promise<unknown>,
): Promise<void> {
  const before = await state();
  for (const [headers, status, code] of cases) {
    const res = await postIt(body, headers);
    assert.equal(res.status, status, res.text);
    assert.equal(res.body.error.code, code, res.text);
  }
  assert.deepEqual(await state(), before);
}
