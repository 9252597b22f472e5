import path from 'node:path';
import type { PosternConfig } from '../config/load.js';
import type { Logger } from '../log.js';
import { backupState, restoreState } from '../operator/backup.js';
import { str, type OptionSpec, type Values } from './command.js';

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
    run: (config, v, logger) => backupState(config.state_dir, path.resolve(str(v.to)!), logger),
  },
  restore: {
    usage: 'restore --from DIR',
    options: { from: { type: 'string' } },
    required: ['from'],
    run: (config, v, logger) => restoreState(path.resolve(str(v.from)!), config.state_dir, logger),
  },
};
