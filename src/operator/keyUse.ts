import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { OperatorWriter } from './context.js';

/** How often the keys' last use is written to the index. */
const FLUSH_EVERY_MS = 60_000;

/**
 * Keeps when each API key last authenticated a request: in memory on the request path (one
 * Map.set), written to the index once a minute (and before `key list` reads it, and at
 * shutdown) through the index writer, so no door waits for a write for it.
 */
export class KeyUseRecorder {
  private pending = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly writer: OperatorWriter,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  note(keyId: string): void {
    this.pending.set(keyId, this.clock.now());
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const uses = [...this.pending];
    this.pending = new Map();
    try {
      await this.writer.write({ type: 'key_use', uses });
    } catch (err) {
      // Only a "last used" time is lost; the next use records it again.
      this.logger.warn({ err }, 'API keys last use not recorded');
    }
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }
}
