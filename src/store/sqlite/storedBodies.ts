import { maxMessageRowid, storedFilesBetween } from '../activity.js';
import type { Queries } from '../queries.js';

/** Rows summed per step of the scan; the event loop gets a turn between steps. */
const SCAN_STEP = 50_000;

/** Every message's stored MIME, files and bytes, counted in steps along the rowid. */
export async function countStoredBodies(q: Queries): Promise<{ files: number; bytes: number }> {
  const last = await maxMessageRowid(q);
  const total = { bytes: 0, files: 0 };
  for (let from = 0; from < last; from += SCAN_STEP) {
    const step = await storedFilesBetween(q, from, from + SCAN_STEP);
    total.bytes += step.bytes;
    total.files += step.files;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return total;
}
