/**
 * Ordering signals for "nothing happened": rather than sleep and hope a background loop looked
 * meanwhile (on a busy machine it may not have), a probe makes it look and shows that it has.
 * Each probe is a project of its own (its own relay or receiver), so what a test counts (its
 * sinks, its receivers, its events) is untouched.
 */

import { attachProvider } from '../../src/operator/providers.js';
import { addWebhook } from '../../src/operator/webhookEndpoints.js';
import { createProjectWithKeys, post, type TestPostern, validMessage } from './postern.js';
import { Sink } from './relaySink.js';
import { type scope, waitFor } from './waiting.js';
import { WebhookReceiver } from './webhookReceiver.js';

type Scope = ReturnType<typeof scope>;

async function sendOne(p: TestPostern, key: string): Promise<string> {
  const res = await post(p.production, '/v1/send', {
    key,
    json: validMessage({ subject: 'probe' }),
  });
  if (res.status !== 202)
    throw new Error(`the probe's message was refused: ${res.status} ${res.text}`);
  return res.body.id as string;
}

/**
 * Resolves once the delivery scheduler has leased due messages at a time (its clock) no earlier
 * than the call: a message of the probe's project, accepted then and due at once, has been
 * relayed. It could only be leased by a look whose clock had reached its acceptance, and one look
 * leases every message due by then (up to `delivery.batch_size`, the longest due first), so a
 * message of the test still waiting afterwards was not due at that look.
 */
export async function schedulerProbe(s: Scope, p: TestPostern): Promise<() => Promise<void>> {
  const sink = s.add(await Sink.start('probe'), (x) => x.close());
  const pk = await createProjectWithKeys(p.ctx, 'scheduler probe', 'pro', { provider: false });
  await attachProvider(p.ctx, pk.project.id, {
    slug: 'smtp',
    host: '127.0.0.1',
    port: String(sink.port),
    tls: 'none',
  });
  return async () => {
    const id = await sendOne(p, pk.liveKey);
    await waitFor(
      async () =>
        (await p.ctx.store.get<{ status: string }>('SELECT status FROM messages WHERE id = ?', id))
          ?.status === 'sent',
      undefined,
      'the scheduler probe to be relayed',
    );
  };
}

/**
 * Resolves once the webhook dispatcher has run a cycle that began after the call: two events of
 * the probe's project, the second sent only once the first was delivered to the probe's endpoint,
 * and delivered too. The cycle that fanned out the first read it after the call, so the cycle that
 * fans out the second began after that one (cycles run one at a time) and read its clock after
 * the call. A cycle claims the due deliveries of every enabled endpoint in one transaction,
 * committed before its attempts start: a delivery of the test not claimed by then (its
 * next_attempt_at unchanged) was not due at that cycle's time.
 */
export async function dispatcherProbe(s: Scope, p: TestPostern): Promise<() => Promise<void>> {
  const receiver = s.add(await WebhookReceiver.start(), (x) => x.close());
  const pk = await createProjectWithKeys(p.ctx, 'dispatcher probe', 'pro');
  await addWebhook(
    {
      ...p.ctx,
      config: { ...p.config, webhooks: { ...p.config.webhooks, allow_private_targets: true } },
    },
    pk.project.id,
    receiver.url('/probe'),
  );
  return async () => {
    for (let i = 0; i < 2; i++) {
      const before = receiver.received.length;
      await sendOne(p, pk.liveKey);
      await receiver.waitFor(before + 1, '/probe');
    }
  };
}
