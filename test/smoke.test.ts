import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createProjectWithKeys, post, startTestPostern, validMessage, type TestPostern } from './support/postern.js';

describe('smoke', () => {
  let p: TestPostern;
  before(async () => {
    p = await startTestPostern();
  });
  after(async () => p.close());

  test('a sandbox send is captured', async () => {
    const { project, testKey } = createProjectWithKeys(p.ctx);
    const res = await post(p.sandbox, '/v1/send', { key: testKey, json: validMessage() });
    assert.equal(res.status, 202);
    assert.match(res.body.id, /^m\.[0-9a-z]{26}$/);
    assert.deepEqual(res.body, {
      id: res.body.id,
      status: 'captured',
      scheduled_at: null,
      paused: false,
      category: null,
      project_id: project.id,
      routing: { provider: null, strategy: null },
    });
  });
});
