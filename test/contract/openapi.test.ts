import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import {
  createProjectWithKeys,
  get,
  post,
  repoRoot,
  startTestPostern,
  type TestPostern,
  validMessage,
} from '../support/postern.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;
const doc = JSON.parse(readFileSync(path.join(repoRoot, 'src/contract/openapi.json'), 'utf8'));

/** Response validators built from the served document alone, as an outside client would. */
function responseValidator(schemaName: string) {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addFormat('mailbox', true);
  ajv.addSchema(doc, 'doc');
  return ajv.getSchema(`doc#/components/schemas/${schemaName}`)!;
}

describe('the OpenAPI document is the single source of the contract', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern();
  });
  after(async () => p.close());

  test("generated files are up to date: the providers' registry, enums and attach form (from their folders) and the TypeScript types (from the OpenAPI documents and the config schema)", () => {
    const run = spawnSync(
      process.execPath,
      [path.join(repoRoot, 'scripts/generate-types.mjs'), '--check'],
      { encoding: 'utf8' },
    );
    assert.equal(run.status, 0, run.stderr);
  });

  test('GET /openapi.json serves the document: OpenAPI 3.1, contract version 1.0.0, both operations', async () => {
    for (const base of [p.production, p.sandbox]) {
      const res = await get(base, '/openapi.json');
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, doc);
      assert.equal(res.body.openapi, '3.1.0');
      assert.equal(res.body.info.version, '1.0.0');
      assert.ok(res.body.paths['/v1/send'].post);
      assert.ok(res.body.paths['/v1/send/batch'].post);
    }
  });

  test('202, 207 and error bodies conform to the schemas of the served document', async () => {
    const { testKey } = await createProjectWithKeys(p.ctx);
    const sendAccepted = responseValidator('SendAccepted');
    const batchResponse = responseValidator('BatchResponse');
    const errorEnvelope = responseValidator('ErrorEnvelope');

    const ok = await post(p.sandbox, '/v1/send', {
      key: testKey,
      json: validMessage({
        category: 'Welcome',
        routing: { provider: ['smtp'], strategy: 'fallback' },
      }),
    });
    assert.equal(ok.status, 202);
    assert.ok(sendAccepted(ok.body), JSON.stringify(sendAccepted.errors));

    const batch = await post(p.sandbox, '/v1/send/batch', {
      key: testKey,
      json: { messages: [validMessage(), { to: 'x' }] },
    });
    assert.equal(batch.status, 207);
    assert.ok(batchResponse(batch.body), JSON.stringify(batchResponse.errors));

    for (const res of [
      await post(p.sandbox, '/v1/send', { key: testKey, json: { subject: 1 } }),
      await post(p.sandbox, '/v1/send', { key: null, json: validMessage() }),
      await post(p.sandbox, '/v1/send', { key: testKey, raw: '{' }),
    ]) {
      assert.ok(errorEnvelope(res.body), `${res.status} ${res.text}`);
    }
  });
});
