/**
 * `BENCH_ONLY=scrape`: GET /metrics with 100,000 messages in the index (90,000 finished, 10,000
 * queued, their files hard links to one real spool file), scraped 20 times: the first scrape
 * includes the spool scan (reused for a minute after), the rest read the status index.
 */

import { linkSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  createProjectWithKeys,
  post,
  spawnPostern,
  tempStateDir,
  validMessage,
} from '../test/support/postern.js';
import { withClosedIndex } from '../test/support/processes.js';
import { removeAfterBench } from './benchServer.js';

const MESSAGES = 100_000;

export async function scrapeBench(): Promise<string> {
  const stateDir = tempStateDir('postern-bench-scrape-');
  try {
    const keys = await withClosedIndex(stateDir, (ctx) => createProjectWithKeys(ctx, 'scrape'));
    let server = await spawnPostern(stateDir);
    await post(server.production, '/v1/send', { key: keys.liveKey, json: validMessage() });
    await server.stop();
    const db = new Database(path.join(stateDir, 'postern.db'));
    const row = db.prepare('SELECT * FROM messages LIMIT 1').get() as Record<string, unknown> & {
      spool_path: string;
    };
    const cols = Object.keys(row).filter(
      (c) => !['id', 'status', 'spool_path', 'created_at'].includes(c),
    );
    const insert = db.prepare(
      `INSERT INTO messages (id, status, spool_path, created_at, ${cols.join(', ')}) VALUES (@id, @status, @spool_path, @created_at, ${cols.map((c) => `@${c}`).join(', ')})`,
    );
    const file = path.join(stateDir, 'spool', row.spool_path);
    const now = Date.now();
    db.transaction(() => {
      for (let i = 0; i < MESSAGES; i++) {
        const queued = i % 10 === 0;
        const id = `m.x${String(i).padStart(24, '0')}`;
        const spoolPath = path.join(path.dirname(row.spool_path), `${id}.eml`);
        // Live rows need their file (start-up fails a live row whose file is gone).
        if (queued) linkSync(file, path.join(stateDir, 'spool', spoolPath));
        insert.run({
          ...row,
          id,
          status: queued ? 'queued' : i % 3 ? 'delivered' : 'sent',
          spool_path: spoolPath,
          created_at: now - (MESSAGES - i) * 1000,
        });
      }
    })();
    db.close();
    server = await spawnPostern(stateDir);
    try {
      const consoleUrl = server.listeners.find((l) => l.protocol === 'console')!.url;
      const ms: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        await (await fetch(`${consoleUrl}/metrics`)).text();
        ms.push(performance.now() - t0);
      }
      const rest = ms.slice(1).sort((a, b) => a - b);
      return `GET /metrics with ${MESSAGES + 1} messages: first ${ms[0].toFixed(1)} ms (with the spool scan), then p50 ${rest[Math.floor(rest.length / 2)].toFixed(1)} ms, max ${rest.at(-1)!.toFixed(1)} ms`;
    } finally {
      await server.stop();
    }
  } finally {
    removeAfterBench(stateDir);
  }
}
