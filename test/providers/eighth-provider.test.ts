/**
 * A provider is one folder. An eighth, fake provider (test/fixtures/eighth-provider/fake:
 * declaration.json and .ts, adapter, feedback verifier, connection check) is copied alone into
 * a copy of the checkout's src/providers/; `npm run gen:types` and the build are run there as a
 * developer runs them. Only generated files change, and the copy's CLI help, its console API
 * document, its send API contract and its web console's attach form name the fake slug; an
 * account attached through that form is checked, relayed through and fed back through the
 * fake's own code. A declaration the generator cannot use is refused, naming its file.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import type { Browser } from 'playwright-core';
import { launchBrowser, newContext, signIn } from '../support/browser.js';
import {
  get,
  post,
  repoRoot,
  runCli,
  type SpawnedPostern,
  spawnPostern,
  tempStateDir,
  validMessage,
} from '../support/postern.js';
import { dropDatabaseFor } from '../support/postgres.js';
import { waitFor } from '../support/waiting.js';

const FIXTURE = path.join(repoRoot, 'test', 'fixtures', 'eighth-provider', 'fake');
const SLUG = 'provider-h-api';
/** What `npm run gen:types` writes: a new provider may change these and nothing else. */
const GENERATED = [
  'src/providers/registry.gen.ts',
  'src/contract/openapi.json',
  'src/contract/types.gen.ts',
  'src/console/openapi.json',
  'src/console/types.gen.ts',
  'web/src/screens/providerAccounts.gen.ts',
];
const PASSWORD = 'eighth-provider-password';

/** A copy of the checkout's sources, as a developer has them (no dist/): its node_modules and native addon linked. */
function copyCheckout(into: string): void {
  for (const entry of ['src', 'web', 'scripts', 'bin', 'config', 'package.json', 'tsconfig.json'])
    cpSync(path.join(repoRoot, entry), path.join(into, entry), { recursive: true });
  symlinkSync(realpathSync(path.join(repoRoot, 'node_modules')), path.join(into, 'node_modules'));
  symlinkSync(path.join(repoRoot, 'native'), path.join(into, 'native'));
}

/** Every file under the copy's sources, by path: its digest. */
function digests(root: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const dir of ['src', 'web', 'scripts']) {
    for (const entry of readdirSync(path.join(root, dir), {
      recursive: true,
      withFileTypes: true,
    })) {
      if (!entry.isFile()) continue;
      const file = path.relative(root, path.join(entry.parentPath, entry.name));
      files.set(
        file,
        createHash('sha256')
          .update(readFileSync(path.join(root, file)))
          .digest('hex'),
      );
    }
  }
  return files;
}

function run(root: string, args: string[]): void {
  const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, `${args.join(' ')}\n${r.stdout}\n${r.stderr}`);
}

/** Fake Mail: answers the fake adapter's sends and its connection check's ping, for one key. */
class FakeMail {
  readonly sends: { message_id: string; from: string; to: string[] }[] = [];
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(key: string): Promise<FakeMail> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const fake = new FakeMail(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on('request', async (req: IncomingMessage, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      if (req.headers['x-fake-key'] !== key) return res.writeHead(401).end('{"error":"bad key"}');
      if (req.method === 'GET' && req.url === '/ping') return res.writeHead(200).end('{}');
      if (req.method === 'POST' && req.url === '/send') {
        fake.sends.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        return res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ id: `fake-${fake.sends.length}` }));
      }
      res.writeHead(404).end();
    });
    return fake;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('an eighth provider, added as one folder', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'postern-eighth-'));
  const stateDir = tempStateDir('postern-eighth-state-');
  const cli = path.join(root, 'bin', 'postern.js');
  const configFile = path.join(stateDir, 'config.json');
  const env = { POSTERN_CONFIG: configFile, POSTERN_STATE_DIR: stateDir };
  let before_: Map<string, string>;
  let after_: Map<string, string>;
  let server: SpawnedPostern;
  let consoleUrl: string;
  let fake: FakeMail;
  let browser: Browser;
  let projectId: string;

  before(async () => {
    copyCheckout(root);
    before_ = digests(root);
    cpSync(FIXTURE, path.join(root, 'src', 'providers', 'fake'), { recursive: true });
    run(root, ['scripts/generate-types.mjs']);
    after_ = digests(root);
    // The build's steps (npm run build), its type check left to the checkout's own build, which checks the fixture.
    run(root, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.json', '--noCheck']);
    run(root, [
      'node_modules/vite/bin/vite.js',
      'build',
      '--config',
      'web/vite.config.ts',
      '--logLevel',
      'warn',
    ]);

    fake = await FakeMail.start('k-123');
    writeFileSync(
      configFile,
      JSON.stringify({
        listeners: [
          {
            name: 'http-production',
            protocol: 'http',
            environment: 'production',
            host: '127.0.0.1',
            port: 0,
          },
          { name: 'console', protocol: 'console', host: '127.0.0.1', port: 0 },
        ],
        delivery: { enabled: true, poll_interval_ms: 50 },
        rate_limits: {
          send_per_key: 100_000,
          batch_per_key: 100_000,
          unauthenticated_per_ip: 100_000,
        },
      }),
    );
    const owner = await runCli(
      [
        'operator',
        'create',
        '--email',
        'owner@example.com',
        '--role',
        'owner',
        '--password-stdin',
        '--json',
      ],
      env,
      PASSWORD,
      cli,
    );
    assert.equal(owner.code, 0, owner.stderr);
    const project = await runCli(
      ['project', 'create', '--name', 'Fake mail', '--plan', 'pro', '--json'],
      env,
      undefined,
      cli,
    );
    assert.equal(project.code, 0, project.stderr);
    projectId = project.json.id;
    server = await spawnPostern(stateDir, env, [], { cli });
    consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await fake?.close();
    await dropDatabaseFor(stateDir);
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  });

  test('npm run gen:types changes only generated files: the folder is the whole change', () => {
    const changed = [...after_]
      .filter(([file, digest]) => before_.has(file) && before_.get(file) !== digest)
      .map(([file]) => file);
    const added = [...after_.keys()].filter((file) => !before_.has(file));
    assert.deepEqual(changed.sort(), [...GENERATED].sort());
    assert.deepEqual(
      added.sort(),
      readdirSync(FIXTURE)
        .map((f) => `src/providers/fake/${f}`)
        .sort(),
    );
  });

  test('postern provider attach --help lists the fake slug and the fields its declaration takes', async () => {
    const help = await runCli(['provider', 'attach', '--help'], env, undefined, cli);
    assert.equal(help.code, 0, help.stderr);
    const block = help.stdout.slice(help.stdout.indexOf(`  ${SLUG}  (Fake Mail API)`));
    assert.ok(block.length < help.stdout.length, help.stdout);
    assert.match(block, /--api-key K +Fake key \[required\]/);
    assert.match(
      block,
      /--endpoint URL +Fake endpoint \(the fake service's base URL\) \[required\]/,
    );
    assert.match(block, /--webhook-secret S +Fake feedback token\n/);
  });

  test("the console API's document and the send API's contract name the fake slug", async () => {
    const consoleDoc = await get(consoleUrl, '/console/api/v1/openapi.json');
    assert.equal(consoleDoc.status, 200);
    assert.ok(consoleDoc.body.components.schemas.ProviderSlug.enum.includes(SLUG));
    assert.match(
      consoleDoc.body.components.schemas.ProviderAttach.description,
      new RegExp(`${SLUG}: api_key\\*, endpoint\\*, webhook_secret[;.]`),
    );
    const contract = await get(server.production, '/openapi.json');
    assert.ok(contract.body.components.schemas.ProviderSlug.enum.includes(SLUG));
  });

  test('the web console attaches a fake account with the fields its declaration takes, and runs its connection check', async () => {
    const ctx = await newContext(browser, consoleUrl);
    try {
      const page = await ctx.newPage();
      await signIn(page, 'owner@example.com', PASSWORD);
      await page.goto(`/#/projects/${projectId}/providers`);
      await page
        .locator('select[name="slug"] option', { hasText: `${SLUG} (Fake Mail API)` })
        .waitFor({ state: 'attached' });
      await page.locator('select[name="slug"]').selectOption(SLUG);
      const form = page.locator('form', { hasText: 'Attach a provider account' });
      assert.deepEqual(await form.locator('.field-label').allTextContents(), [
        'Provider',
        'Fake key',
        'Fake endpoint',
        'Fake feedback token (optional)',
        'Label (optional)',
        'Priority (optional)',
        'Free quota per month (optional)',
      ]);
      assert.equal(await form.getByLabel('Fake key').getAttribute('type'), 'password');
      await form.getByLabel('Fake key').fill('k-123');
      await form.getByLabel(/^Fake endpoint/).fill(fake.url);
      await form.getByLabel('Fake feedback token').fill('feedback-token-1');
      await form.getByRole('button', { name: 'Attach' }).click();
      const row = page.locator('tbody tr', { hasText: SLUG });
      await row.waitFor();
      await row.getByRole('button', { name: 'Check connection' }).click();
      await row.getByText(/^OK: fake key accepted/).waitFor({ timeout: 30_000 });
    } finally {
      await ctx.close();
    }
  });

  test("a send pinned to the fake slug goes out through its adapter, and the provider's feedback comes back through its verifier", async () => {
    const list = await runCli(
      ['provider', 'list', '--project', projectId, '--json'],
      env,
      undefined,
      cli,
    );
    const account = list.json.providers.find((p: { slug: string }) => p.slug === SLUG);
    assert.ok(account, list.stdout);
    const key = await runCli(
      ['key', 'create', '--project', projectId, '--mode', 'live', '--json'],
      env,
      undefined,
      cli,
    );
    const sent = await post(server.production, '/v1/send', {
      key: key.json.key,
      json: validMessage({ routing: { provider: SLUG } }),
    });
    assert.equal(sent.status, 202, sent.text);
    const id = sent.body.id as string;
    await waitFor(() => fake.sends.length === 1, 60_000, 'the fake adapter to send');
    assert.deepEqual(fake.sends[0], {
      message_id: id,
      from: 'sender@example.com',
      to: ['rcpt@example.org'],
    });
    const status = async () =>
      (await runCli(['message', 'show', id, '--json'], env, undefined, cli)).json?.status as
        | string
        | undefined;
    await waitFor(async () => (await status()) === 'sent', 60_000, 'the message to be sent');

    const event = { id: 'ev-1', message_id: 'fake-1', recipient: 'rcpt@example.org' };
    const refused = await post(server.production, `/v1/feedback/${account.id}/not-the-token`, {
      json: event,
    });
    assert.equal(refused.status, 401, refused.text);
    const fed = await post(server.production, `/v1/feedback/${account.id}/feedback-token-1`, {
      json: event,
    });
    assert.equal(fed.status, 200, fed.text);
    assert.deepEqual(fed.body, { received: 1, applied: 1, duplicates: 0, unknown: 0 });
    assert.equal(await status(), 'delivered');
  });
});

describe('a provider declaration the generator cannot use', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'postern-declarations-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  /** The generator's inputs, with the fake folder's declaration.json changed by `edit`. */
  async function generateWith(edit: (declaration: any) => void): Promise<string> {
    rmSync(root, { recursive: true, force: true });
    for (const file of ['src/providers', 'src/contract/openapi.json', 'src/console/openapi.json'])
      cpSync(path.join(repoRoot, file), path.join(root, file), { recursive: true });
    cpSync(FIXTURE, path.join(root, 'src/providers/fake'), { recursive: true });
    const file = path.join(root, 'src/providers/fake/declaration.json');
    const declaration = JSON.parse(readFileSync(file, 'utf8'));
    edit(declaration);
    writeFileSync(file, JSON.stringify(declaration));
    const { generateProviders } = await import(
      pathToFileURL(path.join(repoRoot, 'scripts', 'generate-providers.mjs')).href
    );
    try {
      await generateProviders(pathToFileURL(`${root}/`));
    } catch (err) {
      return (err as Error).message;
    }
    return 'accepted';
  }

  test('as it is, the fixture is accepted', async () => {
    assert.equal(await generateWith(() => undefined), 'accepted');
  });

  test('a field that is not an account field, a required field it does not take, a slug another provider has, a property the format lacks: each refused, naming the file', async () => {
    const file = 'src/providers/fake/declaration.json';
    assert.equal(
      await generateWith((d) => (d.api.account.properties.colour = {})),
      `${file}: provider-h-api takes "colour", which is not a field of src/providers/accountFields.json (host, port, user, pass, tls, endpoint, api_key, region, domain, webhook_secret, webhook_public_key)`,
    );
    assert.equal(
      await generateWith((d) => d.api.account.required.push('region')),
      `${file}: provider-h-api requires "region" without listing it in its properties`,
    );
    assert.match(
      await generateWith((d) => (d.api.slug = 'provider-a-api')),
      /^src\/providers\/(fake|ses)\/declaration\.json: slug provider-a-api is declared by src\/providers\/(fake|ses)\/declaration\.json too$/,
    );
    assert.match(
      await generateWith((d) => (d.api.label = 'x')),
      /^src\/providers\/fake\/declaration\.json: \/api must NOT have additional properties/,
    );
  });
});
