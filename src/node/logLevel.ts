import type { PosternConfig } from '../config/load.js';
import { type Logger, setLogLevel } from '../log.js';
import { type Component, sameSection } from './components.js';

/** The event loop's log level: POSTERN_LOG_LEVEL over log.level, set again when log changes. */
export class LogLevelComponent implements Component<Pick<PosternConfig, 'log'>> {
  readonly name = 'log';

  constructor(
    private section: Pick<PosternConfig, 'log'>,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {}

  async stop(): Promise<void> {}

  reload(section: Pick<PosternConfig, 'log'>): void {
    if (sameSection(section, this.section)) return;
    this.section = section;
    setLogLevel(this.logger, process.env.POSTERN_LOG_LEVEL || section.log.level);
  }
}
