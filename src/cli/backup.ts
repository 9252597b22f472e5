import path from 'node:path';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { backupState } from '../operator/backup.js';
import { OperatorError } from '../operator/errors.js';
import { restoreState } from '../operator/restore.js';
import { type OptionSpec, str, type Values } from './command.js';

/** A command on the state directory itself (not through an open index): `backup`, `restore`. */
export interface StateCommand {
  usage: string;
  options: OptionSpec;
  required: string[];
  run(config: PosternConfig, values: Values, logger: Logger): Promise<unknown>;
}

export const stateCommands: Record<string, StateCommand> = {
  backup: {
    usage: 'backup --to DIR',
    options: { to: { type: 'string' } },
    required: ['to'],
    run: (config, v, logger) =>
      backupState(sqliteStateDir(config, 'backup'), path.resolve(str(v.to)!), logger),
  },
  restore: {
    usage: 'restore --from DIR',
    options: { from: { type: 'string' } },
    required: ['from'],
    run: (config, v, logger) =>
      restoreState(path.resolve(str(v.from)!), sqliteStateDir(config, 'restore'), logger),
  },
};

/** On PostgreSQL the state directory holds no mail: the database is what to back up, with its own tools. */
function sqliteStateDir(config: PosternConfig, command: string): string {
  if (config.store.backend === 'postgres') {
    throw new OperatorError(
      'invalid_argument',
      `${command} copies the SQLite index and spool; with store.backend "postgres" every message is in the database: use pg_dump / pg_restore (or your database's backups) instead`,
    );
  }
  return config.state_dir;
}
