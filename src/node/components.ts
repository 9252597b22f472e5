import type { Logger } from '../log.js';

/**
 * A part of the node with a life: started once, stopped once, and (for the parts that read a
 * section SIGHUP can change) told the section again on a reload.
 */
export interface Component<Section = never> {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  reload?(section: Section): void;
}

interface Started<Config> {
  component: { readonly name: string; stop(): Promise<void> };
  reload: (config: Config) => void;
}

/**
 * Starts the node's components in the order they are given (each after those it uses) and stops
 * them in reverse. A start that fails stops those already started, then throws.
 */
export class ComponentRunner<Config> {
  private readonly started: Started<Config>[] = [];
  private stopping: Promise<void> | null = null;

  constructor(private readonly logger: Pick<Logger, 'error'>) {}

  /** Starts `component`; `sectionOf` picks the config section its reload is given (none: no reload). */
  async start<C extends Component<S>, S>(
    component: C & Component<S>,
    sectionOf?: (config: Config) => S,
  ): Promise<C> {
    if (this.stopping) throw new Error(`${component.name}: the node is stopping`);
    try {
      await component.start();
    } catch (err) {
      // Those already started stop (a failure among them is logged); the start's error is the answer.
      await this.stop().catch(() => undefined);
      throw err;
    }
    const reload = (config: Config) => {
      if (sectionOf && component.reload) component.reload(sectionOf(config));
    };
    this.started.push({ component, reload });
    return component;
  }

  /** Gives every started component its section of `config`, in start order. */
  reload(config: Config): void {
    for (const { reload } of this.started) reload(config);
  }

  /**
   * Stops every started component, last started first. One that fails to stop is logged and the
   * rest still stop; the first failure is thrown at the end. A second call waits for the first.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    let failure: { err: unknown } | null = null;
    for (let last = this.started.pop(); last; last = this.started.pop()) {
      const { component } = last;
      try {
        await component.stop();
      } catch (err) {
        this.logger.error({ err, component: component.name }, 'a component failed to stop');
        failure ??= { err };
      }
    }
    if (failure) throw failure.err;
  }
}

/** Whether a reloaded section is the one a component has (a component acts only on a change). */
export function sameSection(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
