import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { createKey } from '../../src/operator/keys.js';
import { showProject } from '../../src/operator/projects.js';
import { detachProvider, listProviders, PROVIDER_SLUGS } from '../../src/operator/providers.js';
import { suppress, unsuppress } from '../../src/operator/suppressions.js';
import { allValues, getValue } from '../../src/store/queries.js';
import { assertAccepted, assertErrorEnvelope } from '../support/assertions.js';
import { DEFAULT_PLANS, GIB } from '../support/plans.js';
import {
  cliEnv,
  createProjectWithKeys,
  type HttpResult,
  type ProjectWithKeys,
  post,
  runCli,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';
import { storedMimeCountIn } from '../support/storeReads.js';

/** Plans for this suite: the defaults plus a two-domain plan and a one-message plan. */
const PLANS = {
  ...DEFAULT_PLANS,
  two_domains: {
    monthly_messages: 1000,
    overage: false,
    daily_messages: null,
    monthly_bytes: GIB,
    bytes_grace_percent: 0,
    sender_domains: 2,
  },
  one_message: {
    monthly_messages: 1,
    overage: false,
    daily_messages: null,
    monthly_bytes: GIB,
    bytes_grace_percent: 0,
    sender_domains: null,
  },
};

function assertValidation(res: HttpResult, details: { field: string; code: string }[]): void {
  assert.equal(res.status, 422, res.text);
  assert.deepEqual(res.body, {
    error: {
      type: 'validation_error',
      code: details[0].code,
      message: res.body.error.message,
      details,
    },
  });
}

/** The provider slugs a message names, as a sorted list. */
function slugsNamed(message: string): string[] {
  return [
    ...new Set((message.match(/[a-z0-9-]+/g) ?? []).filter((t) => PROVIDER_SLUGS.includes(t))),
  ].sort();
}

/** The email addresses a message names, as a sorted list. */
function addressesNamed(message: string): string[] {
  return [
    ...new Set(message.match(/[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/g) ?? []),
  ].sort();
}

describe('project policy and caps', () => {
  let p: TestPostern;

  before(async () => {
    p = await startTestPostern({
      config: { plans: PLANS, default_plan: 'free', limits: { categories_per_project: 3 } },
    });
  });
  after(async () => p.close());

  const send = (
    proj: ProjectWithKeys,
    message: Record<string, unknown>,
    env: 'production' | 'sandbox' = 'production',
  ) =>
    post(env === 'production' ? p.production : p.sandbox, '/v1/send', {
      key: env === 'production' ? proj.liveKey : proj.testKey,
      json: message,
    });

  /** Everything a refused message could leave behind, for one project and for the whole spool. */
  const footprint = async (projectId: string) => {
    const q = p.ctx.store;
    const shown = await showProject(p.ctx, projectId);
    return {
      messages: await getValue<number>(
        q,
        'SELECT COUNT(*) FROM messages WHERE project_id = ?',
        projectId,
      ),
      events: await getValue<number>(
        q,
        'SELECT COUNT(*) FROM events WHERE project_id = ?',
        projectId,
      ),
      usage_rows: await q.all(
        'SELECT period, messages, bytes FROM usage_counters WHERE project_id = ? ORDER BY period',
        projectId,
      ),
      sender_domains: shown.usage.sender_domains,
      categories: await allValues<string>(
        q,
        'SELECT name FROM categories WHERE project_id = ? ORDER BY name',
        projectId,
      ),
      spool_files: await storedMimeCountIn(q, p.stateDir),
      all_messages: await getValue<number>(q, 'SELECT COUNT(*) FROM messages'),
    };
  };

  describe('no_providers_configured', () => {
    test('production refuses a project without providers with 422 permission_error', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'no providers', 'pro', { provider: false });
      const before = await footprint(proj.project.id);
      const res = await send(proj, validMessage());
      assertErrorEnvelope(res, 422, 'permission_error', 'no_providers_configured');
      assert.deepEqual(
        await footprint(proj.project.id),
        before,
        'a refused message stores nothing',
      );
    });

    test('the sandbox accepts for a project without providers (captured)', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'no providers sandbox', 'pro', {
        provider: false,
      });
      assertAccepted(await send(proj, validMessage(), 'sandbox'), 'captured');
    });

    test('a project whose only provider was detached is refused in production', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'detached provider');
      assertAccepted(await send(proj, validMessage()));
      for (const account of (await listProviders(p.ctx, proj.project.id)).providers)
        await detachProvider(p.ctx, account.id);
      assertErrorEnvelope(
        await send(proj, validMessage()),
        422,
        'permission_error',
        'no_providers_configured',
      );
    });

    test('a provider detached by another process (the CLI) counts from the very next send, right after sends that used it', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'detached elsewhere');
      assertAccepted(await send(proj, validMessage()));
      assertAccepted(await send(proj, validMessage()));
      for (const account of (await listProviders(p.ctx, proj.project.id)).providers) {
        const detached = await runCli(['provider', 'detach', account.id, '--json'], cliEnv(p));
        assert.equal(detached.code, 0, detached.stderr);
      }
      assertErrorEnvelope(
        await send(proj, validMessage()),
        422,
        'permission_error',
        'no_providers_configured',
      );
    });
  });

  describe('routing_provider_not_configured', () => {
    let proj: ProjectWithKeys;
    before(async () => {
      proj = await createProjectWithKeys(p.ctx, 'routing pins'); // smtp attached
    });

    for (const env of ['production', 'sandbox'] as const) {
      test(`${env}: a pin (string) to an unattached provider is refused, naming it`, async () => {
        const before = await footprint(proj.project.id);
        const res = await send(
          proj,
          validMessage({ routing: { provider: 'provider-b-api' } }),
          env,
        );
        assertErrorEnvelope(res, 422, 'validation_error', 'routing_provider_not_configured');
        assert.deepEqual(
          slugsNamed(res.body.error.message),
          ['provider-b-api'],
          res.body.error.message,
        );
        assert.deepEqual(
          await footprint(proj.project.id),
          before,
          'a refused message stores nothing',
        );
      });

      test(`${env}: a list pin names exactly the missing slugs, not the attached one`, async () => {
        const res = await send(
          proj,
          validMessage({
            routing: {
              provider: ['provider-c-smtp', 'smtp', 'provider-a-api'],
              strategy: 'fallback',
            },
          }),
          env,
        );
        assertErrorEnvelope(res, 422, 'validation_error', 'routing_provider_not_configured');
        assert.deepEqual(
          slugsNamed(res.body.error.message),
          ['provider-a-api', 'provider-c-smtp'],
          res.body.error.message,
        );
      });

      test(`${env}: a pin to the attached provider is accepted`, async () => {
        const res = await send(proj, validMessage({ routing: { provider: ['smtp'] } }), env);
        assertAccepted(res, env === 'production' ? 'queued' : 'captured');
        assert.deepEqual(res.body.routing, { provider: ['smtp'], strategy: null });
      });
    }

    test('sandbox: a project without providers still gets routing_provider_not_configured for a pin', async () => {
      const bare = await createProjectWithKeys(p.ctx, 'bare pins', 'pro', { provider: false });
      const res = await send(bare, validMessage({ routing: { provider: 'smtp' } }), 'sandbox');
      assertErrorEnvelope(res, 422, 'validation_error', 'routing_provider_not_configured');
      assert.deepEqual(slugsNamed(res.body.error.message), ['smtp'], res.body.error.message);
    });

    test('production: no providers at all wins over a missing pin', async () => {
      const bare = await createProjectWithKeys(p.ctx, 'bare pins prod', 'pro', { provider: false });
      assertErrorEnvelope(
        await send(bare, validMessage({ routing: { provider: 'provider-b-api' } })),
        422,
        'permission_error',
        'no_providers_configured',
      );
    });

    test('duplicate slugs in a routing list are body validation routing:duplicate_provider, before the pin check', async () => {
      for (const env of ['production', 'sandbox'] as const) {
        assertValidation(
          await send(proj, validMessage({ routing: { provider: ['smtp', 'smtp'] } }), env),
          [{ field: 'routing.provider', code: 'routing:duplicate_provider' }],
        );
        assertValidation(
          await send(
            proj,
            validMessage({ routing: { provider: ['provider-d-api', 'smtp', 'provider-d-api'] } }),
            env,
          ),
          [{ field: 'routing.provider', code: 'routing:duplicate_provider' }],
        );
      }
    });
  });

  describe('suppressed_recipient', () => {
    let proj: ProjectWithKeys;
    before(async () => {
      proj = await createProjectWithKeys(p.ctx, 'suppressions');
      await suppress(p.ctx, proj.project.id, 'Foo@Example.COM', 'hard_bounce');
      await suppress(p.ctx, proj.project.id, 'bar@example.net', 'complaint');
    });

    for (const field of ['to', 'cc', 'bcc'] as const) {
      for (const env of ['production', 'sandbox'] as const) {
        test(`${env}: a suppressed address in ${field} is refused, matched case-insensitively and named lower-cased`, async () => {
          const before = await footprint(proj.project.id);
          const message = validMessage(
            field === 'to'
              ? { to: 'Foo <foo@example.com>' }
              : { [field]: ['ok@example.org', 'foo@example.com'] },
          );
          const res = await send(proj, message, env);
          assertErrorEnvelope(res, 422, 'validation_error', 'suppressed_recipient');
          assert.deepEqual(
            addressesNamed(res.body.error.message),
            ['foo@example.com'],
            res.body.error.message,
          );
          assert.deepEqual(
            await footprint(proj.project.id),
            before,
            'a refused message stores nothing',
          );
        });
      }
    }

    test('the address stored lower-case matches an upper-case recipient', async () => {
      const res = await send(proj, validMessage({ to: ['BAR@EXAMPLE.NET'] }));
      assertErrorEnvelope(res, 422, 'validation_error', 'suppressed_recipient');
      assert.deepEqual(
        addressesNamed(res.body.error.message),
        ['bar@example.net'],
        res.body.error.message,
      );
    });

    test('the message names every suppressed recipient across to, cc and bcc, and no other', async () => {
      const res = await send(
        proj,
        validMessage({
          to: ['clean@example.org', 'FOO@example.com'],
          cc: 'other@example.org',
          bcc: ['Bar@Example.Net'],
        }),
      );
      assertErrorEnvelope(res, 422, 'validation_error', 'suppressed_recipient');
      assert.deepEqual(
        addressesNamed(res.body.error.message),
        ['bar@example.net', 'foo@example.com'],
        res.body.error.message,
      );
    });

    test('a send with no suppressed recipient is accepted', async () => {
      assertAccepted(
        await send(proj, validMessage({ to: 'foo@example.org', cc: 'foo.bar@example.com' })),
      );
    });

    test('after unsuppress the same send is accepted', async () => {
      const other = await createProjectWithKeys(p.ctx, 'unsuppress');
      await suppress(p.ctx, other.project.id, 'Foo@Example.COM');
      assertErrorEnvelope(
        await send(other, validMessage({ to: 'foo@example.com' })),
        422,
        'validation_error',
        'suppressed_recipient',
      );
      await unsuppress(p.ctx, other.project.id, 'foo@example.com');
      assertAccepted(await send(other, validMessage({ to: 'foo@example.com' })));
    });

    test('suppressions are per project', async () => {
      const other = await createProjectWithKeys(p.ctx, 'no suppressions');
      assertAccepted(await send(other, validMessage({ to: 'foo@example.com' })));
    });
  });

  describe('sender_domain:limit_reached (plan sender_domains 2)', () => {
    test('two domains are accepted, a third is refused, a reused domain is still accepted', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'domains', 'two_domains');
      assertAccepted(await send(proj, validMessage({ from: 'a@a.example' })));
      assertAccepted(await send(proj, validMessage({ from: 'Bee <b@b.example>' })));
      const before = await footprint(proj.project.id);
      const refused = await send(proj, validMessage({ from: 'c@c.example' }));
      assertErrorEnvelope(refused, 422, 'validation_error', 'sender_domain:limit_reached');
      assert.deepEqual(
        await footprint(proj.project.id),
        before,
        'a refused message stores nothing and registers no domain',
      );
      assertAccepted(await send(proj, validMessage({ from: 'other@a.example' })));
      assertAccepted(await send(proj, validMessage({ from: 'x@B.EXAMPLE' })), 'queued');
      assert.deepEqual(
        [...(await showProject(p.ctx, proj.project.id)).usage.sender_domains].sort(),
        ['a.example', 'b.example'],
      );
    });

    test('a subdomain counts as a new domain', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'subdomains', 'two_domains');
      assertAccepted(await send(proj, validMessage({ from: 'a@a.example' })));
      assertAccepted(await send(proj, validMessage({ from: 'a@mail.a.example' })));
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'b@b.example' })),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'a@news.a.example' })),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
      assert.deepEqual(
        [...(await showProject(p.ctx, proj.project.id)).usage.sender_domains].sort(),
        ['a.example', 'mail.a.example'],
      );
    });

    test('a full project refuses a subdomain of a registered domain', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'subdomain refused', 'two_domains');
      assertAccepted(await send(proj, validMessage({ from: 'a@a.example' })));
      assertAccepted(await send(proj, validMessage({ from: 'b@b.example' })));
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'a@mail.a.example' })),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
    });

    test('the cap applies in the sandbox too, and sandbox sends register domains', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'domains sandbox', 'two_domains');
      assertAccepted(
        await send(proj, validMessage({ from: 'a@a.example' }), 'sandbox'),
        'captured',
      );
      assertAccepted(
        await send(proj, validMessage({ from: 'b@b.example' }), 'sandbox'),
        'captured',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'c@c.example' }), 'sandbox'),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'c@c.example' })),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
      assertAccepted(await send(proj, validMessage({ from: 'b@b.example' })));
    });

    test('concurrent sends from 10 new domains register exactly 2', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'domains concurrent', 'two_domains');
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => send(proj, validMessage({ from: `s@d${i}.example` }))),
      );
      const accepted = results.filter((r) => r.status === 202);
      assert.equal(accepted.length, 2);
      for (const r of results.filter((r) => r.status !== 202))
        assertErrorEnvelope(r, 422, 'validation_error', 'sender_domain:limit_reached');
      assert.equal((await showProject(p.ctx, proj.project.id)).usage.sender_domains.length, 2);
      assert.equal((await footprint(proj.project.id)).messages, 2);
    });
  });

  describe('category:limit_reached (limits.categories_per_project 3)', () => {
    test('3 distinct categories are accepted, a 4th new one refused, reuse accepted; names are case-sensitive', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'categories');
      for (const category of ['Welcome', 'welcome', 'News']) {
        const res = await send(proj, validMessage({ category }));
        assertAccepted(res);
        assert.equal(res.body.category, category);
      }
      const before = await footprint(proj.project.id);
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'Digest' })),
        422,
        'validation_error',
        'category:limit_reached',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'WELCOME' })),
        422,
        'validation_error',
        'category:limit_reached',
      );
      assert.deepEqual(
        await footprint(proj.project.id),
        before,
        'a refused message stores nothing and registers no category',
      );
      assertAccepted(await send(proj, validMessage({ category: 'welcome' })));
      assertAccepted(await send(proj, validMessage({ category: 'Welcome' })));
      assertAccepted(await send(proj, validMessage({ category: null })));
      assertAccepted(await send(proj, validMessage()));
      assert.equal((await showProject(p.ctx, proj.project.id)).usage.categories, 3);
    });

    test('concurrent sends with 10 new categories register exactly 3', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'categories concurrent');
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => send(proj, validMessage({ category: `c${i}` }))),
      );
      assert.equal(results.filter((r) => r.status === 202).length, 3);
      for (const r of results.filter((r) => r.status !== 202))
        assertErrorEnvelope(r, 422, 'validation_error', 'category:limit_reached');
      assert.equal((await showProject(p.ctx, proj.project.id)).usage.categories, 3);
      assert.equal((await footprint(proj.project.id)).messages, 3);
    });

    test('the category cap applies in the sandbox and is per project', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'categories sandbox');
      for (const category of ['a', 'b', 'c'])
        assertAccepted(await send(proj, validMessage({ category }), 'sandbox'), 'captured');
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'd' }), 'sandbox'),
        422,
        'validation_error',
        'category:limit_reached',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'd' })),
        422,
        'validation_error',
        'category:limit_reached',
      );
      const other = await createProjectWithKeys(p.ctx, 'categories other');
      assertAccepted(await send(other, validMessage({ category: 'd' })));
    });
  });

  describe('order of checks', () => {
    test('invalid key + invalid body → 401', async () => {
      const res = await post(p.production, '/v1/send', {
        key: `ps_live_${'x'.repeat(40)}`,
        raw: '{not json',
      });
      assertErrorEnvelope(res, 401, 'authentication_error', 'invalid_api_key');
      const missing = await post(p.production, '/v1/send', { json: { subject: 5 } });
      assertErrorEnvelope(missing, 401, 'authentication_error', 'missing_api_key');
    });

    test('invalid body + suppressed recipient → 422 body validation with details', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order suppressed');
      await suppress(p.ctx, proj.project.id, 'foo@example.com');
      const { subject: _s, ...noSubject } = validMessage({ to: 'foo@example.com' });
      assertValidation(await send(proj, noSubject), [
        { field: 'subject', code: 'subject:required' },
      ]);
    });

    test('no providers + quota spent → no_providers_configured', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order providers quota', 'one_message');
      assertAccepted(await send(proj, validMessage()));
      assertErrorEnvelope(
        await send(proj, validMessage()),
        402,
        'quota_error',
        'monthly_quota_exceeded',
      );
      for (const account of (await listProviders(p.ctx, proj.project.id)).providers)
        await detachProvider(p.ctx, account.id);
      assertErrorEnvelope(
        await send(proj, validMessage()),
        422,
        'permission_error',
        'no_providers_configured',
      );
    });

    test('suppressed + quota spent → suppressed_recipient', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order suppressed quota', 'one_message');
      await suppress(p.ctx, proj.project.id, 'blocked@example.org');
      assertAccepted(await send(proj, validMessage()));
      assertErrorEnvelope(
        await send(proj, validMessage()),
        402,
        'quota_error',
        'monthly_quota_exceeded',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ to: 'blocked@example.org' })),
        422,
        'validation_error',
        'suppressed_recipient',
      );
    });

    test('missing pin + suppressed recipient → routing_provider_not_configured', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order pin suppressed');
      await suppress(p.ctx, proj.project.id, 'blocked@example.org');
      assertErrorEnvelope(
        await send(
          proj,
          validMessage({ to: 'blocked@example.org', routing: { provider: 'provider-f-api' } }),
        ),
        422,
        'validation_error',
        'routing_provider_not_configured',
      );
    });

    test('suppressed recipient + new sender domain over the cap → suppressed_recipient', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order suppressed domain', 'two_domains');
      await suppress(p.ctx, proj.project.id, 'blocked@example.org');
      assertAccepted(await send(proj, validMessage({ from: 'a@a.example' })));
      assertAccepted(await send(proj, validMessage({ from: 'b@b.example' })));
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 'c@c.example', to: 'blocked@example.org' })),
        422,
        'validation_error',
        'suppressed_recipient',
      );
    });

    test('sender domain over the cap + category over the cap → sender_domain:limit_reached', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order domain category', 'two_domains');
      for (const [i, category] of ['x', 'y', 'z'].entries())
        assertAccepted(await send(proj, validMessage({ from: `s@d${i % 2}.example`, category })));
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 's@d9.example', category: 'new' })),
        422,
        'validation_error',
        'sender_domain:limit_reached',
      );
      assertErrorEnvelope(
        await send(proj, validMessage({ from: 's@d0.example', category: 'new' })),
        422,
        'validation_error',
        'category:limit_reached',
      );
    });

    test('category over the cap + quota spent → category:limit_reached', async () => {
      const proj = await createProjectWithKeys(p.ctx, 'order category quota', 'one_message');
      assertAccepted(await send(proj, validMessage({ category: 'a' })));
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'a' })),
        402,
        'quota_error',
        'monthly_quota_exceeded',
      );
      // Fill the category cap through the sandbox (not metered), then a new category wins over the 402.
      assertAccepted(await send(proj, validMessage({ category: 'b' }), 'sandbox'), 'captured');
      assertAccepted(await send(proj, validMessage({ category: 'c' }), 'sandbox'), 'captured');
      assertErrorEnvelope(
        await send(proj, validMessage({ category: 'd' })),
        422,
        'validation_error',
        'category:limit_reached',
      );
    });
  });
});

describe('order of checks: rate limit before body validation', () => {
  let p: TestPostern;
  const clock = new ManualClock(Date.parse('2026-04-01T09:00:00Z'));

  before(async () => {
    p = await startTestPostern({
      clock,
      config: {
        rate_limits: {
          window_seconds: 60,
          send_per_key: 1,
          batch_per_key: 1,
          unauthenticated_per_ip: 1000,
        },
      },
    });
  });
  after(async () => p.close());

  test('rate-limited + invalid body → 429 rate_limited', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'rate order');
    assertAccepted(
      await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
    );
    const before = await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages');
    const unparseable = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      raw: '{not json',
    });
    assertErrorEnvelope(unparseable, 429, 'rate_limit_error', 'rate_limited');
    assert.match(unparseable.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
    const invalid = await post(p.production, '/v1/send', {
      key: proj.liveKey,
      json: { from: 'nope' },
    });
    assertErrorEnvelope(invalid, 429, 'rate_limit_error', 'rate_limited');
    assert.equal(await getValue<number>(p.ctx.store, 'SELECT COUNT(*) FROM messages'), before);
  });

  test('rate-limited + suppressed recipient → 429 rate_limited', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'rate order suppressed');
    await suppress(p.ctx, proj.project.id, 'blocked@example.org');
    assertErrorEnvelope(
      await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ to: 'blocked@example.org' }),
      }),
      422,
      'validation_error',
      'suppressed_recipient',
    );
    assertErrorEnvelope(
      await post(p.production, '/v1/send', {
        key: proj.liveKey,
        json: validMessage({ to: 'blocked@example.org' }),
      }),
      429,
      'rate_limit_error',
      'rate_limited',
    );
  });

  test('a second key of the same project is not rate limited by the first', async () => {
    const proj = await createProjectWithKeys(p.ctx, 'rate order keys');
    assertAccepted(
      await post(p.production, '/v1/send', { key: proj.liveKey, json: validMessage() }),
    );
    const second = (await createKey(p.ctx, proj.project.id, 'live')).key;
    assertAccepted(await post(p.production, '/v1/send', { key: second, json: validMessage() }));
  });
});
