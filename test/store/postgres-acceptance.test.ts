import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type pg from 'pg';
import {
  type AcceptanceOutcome,
  type AcceptanceRecord,
  recordAcceptance,
} from '../../src/commit/acceptance.js';
import {
  commitAcceptanceGroup as commitThrough,
  type GroupAcceptanceResult,
  type GroupAcceptanceUnit,
} from '../../src/commit/acceptanceGroup.js';
import { AcceptanceGroupWriter } from '../../src/commit/acceptanceGroupWriter.js';
import { silentLogger } from '../../src/log.js';
import type { LimitSettings } from '../../src/policy/usageLimits.js';
import { openDatabase } from '../../src/store/db.js';
import { postgresAcceptanceGroups } from '../../src/store/postgres/acceptanceGroups.js';
import { readBodyChunks } from '../../src/store/postgres/bodyChunks.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { insertProject } from '../../src/store/projects.js';
import { sqliteQueries } from '../../src/store/queries.js';
import { dayPeriod, monthPeriod } from '../../src/store/usage.js';
import { DEFAULT_PLANS, plan } from '../support/plans.js';
import {
  type FreshDatabase,
  freshDatabase,
  postgresUnavailable,
  startPrivatePostgres,
  type TestPostgres,
  testPool,
} from '../support/postgres.js';

/** A group committed on `pool`'s acceptance groups (store/postgres/acceptanceGroups.ts). */
const commitAcceptanceGroup = (
  pool: pg.Pool,
  units: readonly GroupAcceptanceUnit[],
  limits: Parameters<typeof commitThrough>[2],
) => commitThrough(postgresAcceptanceGroups(pool), units, limits);

/** One instant for every record: the month's and the day's counters are the same ones throughout. */
const NOW = Date.UTC(2026, 10, 26, 12, 0, 0);

const LIMITS: LimitSettings = {
  enabled: true,
  plans: {
    // free: 100 a day, 3,000 a month, one sender domain; pro: ten sender domains, no daily ceiling.
    ...DEFAULT_PLANS,
    one_a_month: plan({ monthly_messages: 1 }),
    two_a_day: plan({ monthly_messages: 1000, daily_messages: 2 }),
    // 1,000 bytes a month and 10 % grace: 1,100 bytes in all.
    small_volume: plan({ monthly_messages: 1000, monthly_bytes: 1000, bytes_grace_percent: 10 }),
  },
  defaultPlan: 'free',
  categoriesPerProject: 2,
};

let serial = 0;

interface RecordOptions {
  environment?: 'production' | 'sandbox';
  senderDomain?: string;
  category?: string | null;
  bytes?: number;
  key?: string;
  /** A message id of its own (to collide with another); otherwise a new one. */
  id?: string;
  body?: Buffer;
}

/** An acceptance as the pipeline builds one (acceptMessage.ts), with only what the commit reads made to vary. */
function acceptance(projectId: string, opts: RecordOptions = {}): AcceptanceRecord {
  serial += 1;
  const id = opts.id ?? `m.pgaccept.${process.pid}.${serial}`;
  const environment = opts.environment ?? 'production';
  const senderDomain = opts.senderDomain ?? 'app.example';
  const category = opts.category ?? null;
  const bytes = opts.bytes ?? opts.body?.length ?? 1000;
  return {
    message: {
      id,
      project_id: projectId,
      environment,
      source: 'http',
      status: environment === 'sandbox' ? 'captured' : 'queued',
      hold_reason: null,
      from_email: `app@${senderDomain}`,
      recipients: JSON.stringify({ to: ['ann@example.org'], cc: [], bcc: [] }),
      subject: `Hello ${serial}`,
      tags: '[]',
      metadata: '{}',
      category,
      routing: '{}',
      provider_options: null,
      scheduled_at: null,
      spool_path: opts.body ? '' : `2026/11/26/${id}.eml`,
      size_bytes: bytes,
      idempotency_key: opts.key ?? null,
      created_at: NOW,
      updated_at: NOW,
      next_attempt_at: environment === 'sandbox' ? null : NOW,
    },
    body: opts.body ?? null,
    idempotency:
      opts.key === undefined
        ? null
        : { key: opts.key, response: JSON.stringify({ id, status: 'queued' }) },
    usage: { projectId, environment, senderDomain, category, bytes },
    event: {
      project_id: projectId,
      message_id: id,
      type: 'mail.accepted',
      created_at: NOW,
      data: JSON.stringify({ mail: { uid: id } }),
    },
  };
}

const units = (records: AcceptanceRecord[]): GroupAcceptanceUnit[] =>
  records.map((record) => ({ record }));

/** An outcome in a word, for tables: `stored`, `duplicate`, or `refused:<code>`. */
function word(result: GroupAcceptanceResult): string {
  if (!result.ok) return `failed: ${result.error}`;
  return result.outcome.kind === 'refused'
    ? `refused:${result.outcome.refusal.code}`
    : result.outcome.kind;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of stream) pieces.push(piece as Buffer);
  return Buffer.concat(pieces);
}

describe('the acceptance commit on PostgreSQL', { skip: postgresUnavailable() }, () => {
  let server: TestPostgres;
  let database: FreshDatabase;
  /** Three pools on one database: three nodes, as far as the database can tell. */
  let nodes: pg.Pool[] = [];
  let pool: pg.Pool;
  before(async () => {
    server = await startPrivatePostgres();
    database = await freshDatabase(server.url);
    nodes = [0, 1, 2].map(() => testPool(database.url, 4));
    pool = nodes[0];
    await migratePostgres(pool, silentLogger());
  });
  after(async () => {
    await Promise.all(nodes.map((p) => p.end()));
    await database?.drop();
    await server?.stop();
  });

  async function newProject(planName: string): Promise<string> {
    const id = `p.pgaccept.${randomBytes(6).toString('hex')}`;
    await pool.query('INSERT INTO projects (id, name, plan, created_at) VALUES ($1, $2, $3, $4)', [
      id,
      `project ${id}`,
      planName,
      NOW,
    ]);
    return id;
  }

  async function count(sqlText: string, params: unknown[]): Promise<number> {
    return (await pool.query<{ n: number }>(`SELECT (${sqlText})::int AS n`, params)).rows[0].n;
  }

  async function usage(
    projectId: string,
    period: string,
  ): Promise<{ messages: number; bytes: number } | null> {
    const row = (
      await pool.query<{ messages: string; bytes: string }>(
        'SELECT messages, bytes FROM usage_counters WHERE project_id = $1 AND period = $2',
        [projectId, period],
      )
    ).rows[0];
    return row ? { messages: Number(row.messages), bytes: Number(row.bytes) } : null;
  }

  test('a unit commits its message row, its body (held, or streamed in pieces), its key, its usage and its event', async () => {
    const project = await newProject('pro');
    // 600,000 bytes: three pieces of message_body_chunks.
    const held = acceptance(project, {
      key: 'key-held',
      category: 'welcome',
      body: randomBytes(600_000),
    });
    const streamedBytes = randomBytes(300_001);
    const streamed = acceptance(project, {
      senderDomain: 'mail.example',
      bytes: streamedBytes.length,
    });
    const results = await commitAcceptanceGroup(
      nodes[1],
      [
        { record: held },
        // In odd pieces, as a temp file's stream gives them.
        {
          record: streamed,
          openBody: () =>
            Readable.from([streamedBytes.subarray(0, 70_000), streamedBytes.subarray(70_000)], {
              objectMode: false,
            }),
        },
      ],
      LIMITS,
    );
    assert.deepEqual(results, [
      { ok: true, outcome: { kind: 'stored' } },
      { ok: true, outcome: { kind: 'stored' } },
    ]);

    const row = (await pool.query('SELECT * FROM messages WHERE id = $1', [held.message.id]))
      .rows[0] as Record<string, unknown>;
    assert.equal(row.project_id, project);
    assert.equal(row.subject, held.message.subject);
    assert.equal(row.category, 'welcome');
    assert.equal(row.status, 'queued');
    assert.equal(Number(row.size_bytes), 600_000);
    assert.equal(Number(row.created_at), NOW);
    assert.ok(
      (await readAll(readBodyChunks(pool, held.message.id))).equals(held.body!),
      'the held body reads back byte for byte',
    );
    assert.equal(
      await count('SELECT count(*) FROM message_body_chunks WHERE message_id = $1', [
        held.message.id,
      ]),
      3,
    );
    assert.ok(
      (await readAll(readBodyChunks(pool, streamed.message.id))).equals(streamedBytes),
      'the streamed body reads back byte for byte',
    );

    const key = (
      await pool.query(
        'SELECT message_id, response FROM idempotency_keys WHERE project_id = $1 AND environment = $2 AND key = $3',
        [project, 'production', 'key-held'],
      )
    ).rows[0] as { message_id: string; response: string };
    assert.deepEqual(key, { message_id: held.message.id, response: held.idempotency!.response });
    assert.deepEqual(await usage(project, monthPeriod(NOW)), {
      messages: 2,
      bytes: 600_000 + 300_001,
    });
    assert.deepEqual(await usage(project, dayPeriod(NOW)), {
      messages: 2,
      bytes: 600_000 + 300_001,
    });
    const domains = (
      await pool.query<{ domain: string }>(
        'SELECT domain FROM sender_domains WHERE project_id = $1 ORDER BY domain',
        [project],
      )
    ).rows.map((r) => r.domain);
    assert.deepEqual(domains, ['app.example', 'mail.example']);
    assert.equal(
      await count('SELECT count(*) FROM categories WHERE project_id = $1 AND name = $2', [
        project,
        'welcome',
      ]),
      1,
    );
    const events = (
      await pool.query<{ message_id: string; type: string; data: string }>(
        'SELECT message_id, type, data FROM events WHERE project_id = $1 ORDER BY seq',
        [project],
      )
    ).rows;
    assert.deepEqual(events, [
      { message_id: held.message.id, type: 'mail.accepted', data: held.event.data },
      { message_id: streamed.message.id, type: 'mail.accepted', data: streamed.event.data },
    ]);
  });

  test("a unit holds its project's lock for two statements, its read and its write: a group of three sends seven in all", async () => {
    const project = await newProject('pro');
    const node = testPool(database.url, 1);
    const sent: string[] = [];
    const connect = node.connect.bind(node);
    node.connect = (async () => {
      const client = await connect();
      const query = client.query.bind(client) as (
        config: unknown,
        values?: unknown,
      ) => Promise<unknown>;
      client.query = ((config: string | { text: string }, values?: unknown) => {
        sent.push(
          (typeof config === 'string' ? config : config.text)
            .trim()
            .split(/\s+/)
            .slice(0, 2)
            .join(' '),
        );
        return query(config, values);
      }) as unknown as typeof client.query;
      return client;
    }) as typeof node.connect;
    const records = [
      acceptance(project, {
        key: 'key-statements',
        category: 'welcome',
        body: Buffer.from('held body'),
      }),
      acceptance(project),
      acceptance(project, { environment: 'sandbox' }),
    ];
    try {
      const results = await commitAcceptanceGroup(node, units(records), LIMITS);
      assert.deepEqual(results.map(word), ['stored', 'stored', 'stored']);
      assert.deepEqual(sent, [
        'BEGIN; SET',
        'SELECT plan',
        ...records.flatMap(() => ['WITH known', 'WITH domain']),
        'COMMIT',
      ]);
    } finally {
      await node.end();
    }
    assert.equal(
      await count('SELECT count(*) FROM idempotency_keys WHERE project_id = $1 AND key = $2', [
        project,
        'key-statements',
      ]),
      1,
    );
    assert.equal(
      await count('SELECT count(*) FROM message_body_chunks WHERE message_id = $1', [
        records[0].message.id,
      ]),
      1,
    );
  });

  test('a refused unit (the monthly quota spent) stores nothing: no row, body, key, usage or event', async () => {
    const project = await newProject('one_a_month');
    const first = acceptance(project);
    const refused = acceptance(project, {
      key: 'key-refused',
      category: 'news',
      senderDomain: 'other.example',
      body: Buffer.from('Subject: no\r\n\r\nno\r\n'),
    });
    const results = await commitAcceptanceGroup(pool, units([first, refused]), LIMITS);
    assert.deepEqual(results.map(word), ['stored', 'refused:monthly_quota_exceeded']);
    assert.equal(await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]), 1);
    assert.equal(
      await count('SELECT count(*) FROM message_body_chunks WHERE message_id = $1', [
        refused.message.id,
      ]),
      0,
    );
    assert.equal(
      await count('SELECT count(*) FROM idempotency_keys WHERE project_id = $1', [project]),
      0,
    );
    assert.equal(await count('SELECT count(*) FROM events WHERE project_id = $1', [project]), 1);
    assert.deepEqual(await usage(project, monthPeriod(NOW)), { messages: 1, bytes: 1000 });
    // Caps are checked first, so the refused message's new domain and category would pass them: refused, they are not registered.
    assert.equal(
      await count('SELECT count(*) FROM sender_domains WHERE project_id = $1', [project]),
      1,
    );
    assert.equal(
      await count('SELECT count(*) FROM categories WHERE project_id = $1', [project]),
      0,
    );
  });

  test('a unit that throws (a message id already taken) rolls back alone; the rest of its group commits', async () => {
    const project = await newProject('pro');
    const first = acceptance(project);
    // Its usage, domain and category are written before its message row fails: all rolled back with it.
    const clash = acceptance(project, {
      id: first.message.id,
      key: 'key-clash',
      senderDomain: 'clash.example',
      category: 'clash',
      body: Buffer.from('x'),
    });
    const last = acceptance(project, { key: 'key-last' });
    const results = await commitAcceptanceGroup(pool, units([first, clash, last]), LIMITS);
    assert.deepEqual(results[0], { ok: true, outcome: { kind: 'stored' } });
    assert.equal(results[1].ok, false);
    assert.match(
      (results[1] as { error: string }).error,
      /duplicate key value violates unique constraint "messages_pkey"/,
    );
    assert.deepEqual(results[2], { ok: true, outcome: { kind: 'stored' } });
    assert.equal(await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]), 2);
    assert.deepEqual(await usage(project, monthPeriod(NOW)), { messages: 2, bytes: 2000 });
    assert.deepEqual(
      (
        await pool.query<{ key: string }>(
          'SELECT key FROM idempotency_keys WHERE project_id = $1',
          [project],
        )
      ).rows.map((r) => r.key),
      ['key-last'],
    );
    assert.equal(
      await count('SELECT count(*) FROM sender_domains WHERE project_id = $1 AND domain = $2', [
        project,
        'clash.example',
      ]),
      0,
    );
    assert.equal(
      await count('SELECT count(*) FROM categories WHERE project_id = $1', [project]),
      0,
    );
    assert.equal(
      await count('SELECT count(*) FROM message_body_chunks WHERE message_id = $1', [
        first.message.id,
      ]),
      0,
    );
    assert.equal(await count('SELECT count(*) FROM events WHERE project_id = $1', [project]), 2);
  });

  test('a unit whose text the database refuses (a NUL in its subject) fails alone; the group runs again without it', async () => {
    const project = await newProject('pro');
    const first = acceptance(project, { key: 'key-before-nul' });
    const nul = acceptance(project);
    nul.message.subject = 'before\u0000after';
    const last = acceptance(project);
    const results = await commitAcceptanceGroup(pool, units([first, nul, last]), LIMITS);
    assert.deepEqual(
      [results[0], results[2]],
      [
        { ok: true, outcome: { kind: 'stored' } },
        { ok: true, outcome: { kind: 'stored' } },
      ],
    );
    assert.equal(results[1].ok, false);
    assert.match((results[1] as { error: string }).error, /invalid byte sequence|0x00/);
    assert.equal(await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]), 2);
    assert.equal(
      await count('SELECT count(*) FROM idempotency_keys WHERE project_id = $1', [project]),
      1,
    );
    assert.deepEqual(await usage(project, monthPeriod(NOW)), { messages: 2, bytes: 2000 });
  });

  test("a unit failing for the database's own reason (out of disk space) fails its whole group at once, as a lost connection does", async () => {
    const project = await newProject('pro');
    await pool.query(
      `CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.subject = 'DISK' THEN RAISE EXCEPTION 'no space left' USING ERRCODE = 'disk_full'; END IF; RETURN NEW; END $$`,
    );
    await pool.query(
      'CREATE TRIGGER full_disk BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION full_disk()',
    );
    try {
      const disk = acceptance(project);
      disk.message.subject = 'DISK';
      const results = await commitAcceptanceGroup(
        pool,
        units([acceptance(project), disk, acceptance(project)]),
        LIMITS,
      );
      assert.deepEqual(
        results,
        Array.from({ length: 3 }, () => ({ ok: false, error: 'commit failed: no space left' })),
      );
      assert.equal(
        await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]),
        0,
      );
    } finally {
      await pool.query('DROP TRIGGER full_disk ON messages');
      await pool.query('DROP FUNCTION full_disk()');
    }
  });

  test('three nodes committing 200 acceptances at once against a daily ceiling of 100 store exactly 100', async () => {
    const project = await newProject('free');
    const records = Array.from({ length: 200 }, () => acceptance(project));
    // Groups of 1 to 8 units, dealt to the three nodes in turn, all committing at once.
    const groups: AcceptanceRecord[][] = [];
    for (let at = 0, size = 1; at < records.length; at += size, size = (size % 8) + 1)
      groups.push(records.slice(at, at + size));
    const results = (
      await Promise.all(
        groups.map((group, i) => commitAcceptanceGroup(nodes[i % 3], units(group), LIMITS)),
      )
    ).flat();

    const tally = new Map<string, number>();
    for (const result of results) tally.set(word(result), (tally.get(word(result)) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(tally), {
      stored: 100,
      'refused:daily_send_cap_exceeded': 100,
    });
    assert.equal(
      await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]),
      100,
    );
    assert.equal((await usage(project, dayPeriod(NOW)))?.messages, 100);
    assert.equal((await usage(project, monthPeriod(NOW)))?.messages, 100);
    assert.equal(await count('SELECT count(*) FROM events WHERE project_id = $1', [project]), 100);
  });

  test('one Idempotency-Key committed by three nodes at once stores one message; the others answer its response', async () => {
    const project = await newProject('pro');
    // Five rounds: a race lost by timing alone in one round is lost in five only by the rule.
    for (let round = 1; round <= 5; round++) {
      const key = `key-raced-${round}`;
      const sends = [0, 1, 2].map(() => acceptance(project, { key }));
      // Each first in a group with other work: all three read the key before any of them writes a thing (a
      // write first, such as a usage counter's, would make the others wait for its row and serialize them anyway).
      const results = await Promise.all(
        sends.map((send, i) =>
          commitAcceptanceGroup(
            nodes[i],
            units([send, acceptance(project), acceptance(project)]),
            LIMITS,
          ).then((r) => r[0]),
        ),
      );
      const stored = results.flatMap((r, i) =>
        r.ok && r.outcome.kind === 'stored' ? [sends[i]] : [],
      );
      assert.equal(stored.length, 1, `round ${round}, one stored: ${results.map(word).join(', ')}`);
      const duplicates = results.filter(
        (r): r is { ok: true; outcome: Extract<AcceptanceOutcome, { kind: 'duplicate' }> } =>
          r.ok && r.outcome.kind === 'duplicate',
      );
      assert.equal(
        duplicates.length,
        2,
        `round ${round}, two duplicates: ${results.map(word).join(', ')}`,
      );
      for (const d of duplicates) assert.equal(d.outcome.response, stored[0].idempotency!.response);
      assert.equal(
        await count(
          'SELECT count(*) FROM messages WHERE project_id = $1 AND idempotency_key = $2',
          [project, key],
        ),
        1,
      );
    }
    assert.equal(
      await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]),
      5 * 7,
    );
  });

  test('groups holding two projects in opposite orders, on three nodes at once, never deadlock', async () => {
    const [p, q] = [await newProject('pro'), await newProject('pro')];
    // Every group holds both projects, half of them q first: locked in the order given, two such groups deadlock.
    const groups = Array.from({ length: 30 }, (_, i) => {
      const group = [acceptance(p), acceptance(q), acceptance(p), acceptance(q)];
      return i % 2 === 0 ? group : group.reverse();
    });
    const results = (
      await Promise.all(
        groups.map((group, i) => commitAcceptanceGroup(nodes[i % 3], units(group), LIMITS)),
      )
    ).flat();
    assert.deepEqual([...new Set(results.map(word))], ['stored']);
    assert.equal((await usage(p, dayPeriod(NOW)))?.messages, 60);
    assert.equal((await usage(q, dayPeriod(NOW)))?.messages, 60);
  });

  test("the node's writer groups what arrives while a group commits, answers each unit, and removes scratch files once stored", async () => {
    const project = await newProject('pro');
    const node = testPool(database.url, 4);
    // Each group is one transaction on one connection: counting the connections taken counts the groups.
    let groups = 0;
    const connect = node.connect.bind(node);
    node.connect = (() => {
      groups += 1;
      return connect();
    }) as typeof node.connect;
    const writer = new AcceptanceGroupWriter(
      postgresAcceptanceGroups(node),
      LIMITS,
      silentLogger(),
    );
    const scratch = mkdtempSync(path.join(tmpdir(), 'postern-pg-writer-'));
    try {
      const big = randomBytes(3 * 1024 * 1024 + 17);
      const file = { tmpPath: path.join(scratch, 'big.tmp'), finalPath: '' };
      writeFileSync(file.tmpPath, big);
      const bigRecord = acceptance(project, { body: Buffer.alloc(0), bytes: big.length });
      bigRecord.body = null;
      const taken = acceptance(project);
      // Three ticks of submissions, the second and third while the first group commits.
      const first = writer.submitMany([
        { file, record: bigRecord },
        { file: null, record: taken },
      ]);
      await new Promise((resolve) => setImmediate(resolve));
      const second = writer.submitMany(
        Array.from({ length: 40 }, () => ({
          file: null,
          record: acceptance(project, { body: Buffer.from('held body') }),
        })),
      );
      await new Promise((resolve) => setImmediate(resolve));
      const again = { ...acceptance(project), message: { ...taken.message } };
      const third = writer.submitMany([{ file: null, record: again }]);
      const outcomes = await Promise.allSettled([...first, ...second, ...third]);
      const words = outcomes.map((o) => (o.status === 'fulfilled' ? o.value.kind : 'failed'));
      assert.deepEqual(
        words.filter((_, i) => i !== 1 && i !== 42),
        Array.from({ length: 41 }, () => 'stored'),
      );
      // The same message id twice: one of the two units fails alone (the first group's or the
      // third's, whichever takes the project's lock later: the groups open their connections
      // at once, and the first group's big body takes a while).
      assert.deepEqual([words[1], words[42]].sort(), ['failed', 'stored']);
      assert.equal(
        existsSync(file.tmpPath),
        false,
        'the scratch copy is removed once the body is stored',
      );
      assert.ok((await readAll(readBodyChunks(pool, bigRecord.message.id))).equals(big));
      assert.equal(
        await count('SELECT count(*) FROM messages WHERE project_id = $1', [project]),
        42,
      );
      assert.equal(await writer.lastWriteError(2000), null);
      assert.ok(groups <= 3, `43 units in three ticks took ${groups} group transactions`);
    } finally {
      await writer.close();
      await node.end();
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test("the node's writer answers every unit an error when the database cannot be reached, and refuses units once closed", async () => {
    const project = await newProject('pro');
    const unreachable = testPool('postgres://postern:wrong@127.0.0.1:1/nowhere', 1);
    const writer = new AcceptanceGroupWriter(
      postgresAcceptanceGroups(unreachable),
      LIMITS,
      silentLogger(),
    );
    try {
      const outcomes = await Promise.allSettled(
        writer.submitMany([
          { file: null, record: acceptance(project) },
          { file: null, record: acceptance(project) },
        ]),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['rejected', 'rejected'],
      );
      assert.match((outcomes[0] as PromiseRejectedResult).reason.message, /^commit failed: /);
      assert.match((await writer.lastWriteError(2000)) ?? '', /^commit failed: /);
      await writer.close();
      await assert.rejects(
        writer.submitMany([{ file: null, record: acceptance(project) }])[0],
        /closed/,
      );
    } finally {
      await unreachable.end();
    }
  });

  /** A sequence of acceptances for one project, and what each must come to. */
  interface ParityCase {
    name: string;
    plan: string;
    sends: RecordOptions[];
    expected: string[];
  }

  const parityCases: ParityCase[] = [
    {
      name: 'a new sender domain over the plan cap',
      plan: 'free',
      sends: [
        { senderDomain: 'a.example' },
        { senderDomain: 'b.example' },
        { senderDomain: 'a.example' },
      ],
      expected: ['stored', 'refused:sender_domain:limit_reached', 'stored'],
    },
    {
      name: 'a new category over the project cap',
      plan: 'pro',
      sends: [
        { category: 'one' },
        { category: 'two' },
        { category: 'three' },
        { category: 'one' },
        { category: null },
      ],
      expected: ['stored', 'stored', 'refused:category:limit_reached', 'stored', 'stored'],
    },
    {
      name: 'sandbox mail skips the quotas (but not the caps)',
      plan: 'one_a_month',
      sends: [
        { environment: 'sandbox' },
        { environment: 'sandbox' },
        {},
        {},
        { environment: 'sandbox' },
        { environment: 'sandbox', category: 'a' },
      ],
      expected: [
        'stored',
        'stored',
        'stored',
        'refused:monthly_quota_exceeded',
        'stored',
        'stored',
      ],
    },
    {
      name: 'the monthly volume with its grace',
      plan: 'small_volume',
      sends: [
        { bytes: 600 },
        { bytes: 500 },
        { bytes: 1 },
        { environment: 'sandbox', bytes: 5000 },
      ],
      expected: ['stored', 'stored', 'refused:throughput_quota_exceeded', 'stored'],
    },
    {
      name: 'the daily ceiling, and an Idempotency-Key answered after it',
      plan: 'two_a_day',
      sends: [{ key: 'k' }, {}, { key: 'k' }, {}],
      expected: ['stored', 'stored', 'duplicate', 'refused:daily_send_cap_exceeded'],
    },
  ];

  for (const c of parityCases) {
    test(`SQLite and PostgreSQL decide alike: ${c.name}`, async () => {
      const stateDir = mkdtempSync(path.join(tmpdir(), 'postern-parity-'));
      const db = openDatabase(stateDir, silentLogger());
      try {
        const project = await newProject(c.plan);
        await insertProject(sqliteQueries(db), {
          id: project,
          name: 'parity',
          plan: c.plan,
          created_at: NOW,
        });
        const records = c.sends.map((send) => acceptance(project, send));
        // SQLite: one unit after the other, as the index writer commits them.
        const sqliteOutcomes = [];
        for (const record of records)
          sqliteOutcomes.push(
            await sqliteQueries(db).transaction((tx) => recordAcceptance(tx, record, LIMITS)),
          );
        // PostgreSQL: one group.
        const postgresResults = await commitAcceptanceGroup(nodes[2], units(records), LIMITS);
        assert.deepEqual(postgresResults.map(word), c.expected);
        assert.deepEqual(
          postgresResults.map((r) => (r.ok ? r.outcome : r.error)),
          sqliteOutcomes,
          'the same outcomes, refusals word for word (and retry-after)',
        );
      } finally {
        db.close();
        rmSync(stateDir, { recursive: true, force: true });
      }
    });
  }
});
