import { type MessagePort, type Transferable, Worker } from 'node:worker_threads';

export type ChannelReply = { seq: number; ok: true } | { seq: number; ok: false; error: string };

export type Answer<Reply extends ChannelReply> = Extract<Reply, { ok: true }>;

interface Waiter<Reply extends ChannelReply> {
  resolve: (reply: Answer<Reply>) => void;
  reject: (err: Error) => void;
}

export interface ThreadChannelOptions {
  name: string;
  /** The port keeps the process alive only while a reply is awaited. A Worker's channel always holds it. */
  refWhileWaiting?: boolean;
}

/** The asking side of a worker thread: every request still waiting is rejected here, in one place, when the other side goes away. */
export class ThreadChannel<Reply extends ChannelReply> {
  private readonly waiters = new Map<number, Waiter<Reply>>();
  private ended: Error | null = null;

  constructor(
    private readonly endpoint: Worker | MessagePort,
    private readonly options: ThreadChannelOptions,
  ) {
    endpoint.on('message', (replies: Reply[]) => {
      for (const reply of replies) this.settle(reply);
    });
    if (endpoint instanceof Worker)
      endpoint.on('exit', (code: number) =>
        this.end(new Error(`${options.name} exited with code ${code}`)),
      );
    else endpoint.on('close', () => this.end(new Error(`${options.name} channel closed`)));
    if (options.refWhileWaiting) endpoint.unref();
  }

  get waiting(): number {
    return this.waiters.size;
  }

  /** Once the other side is gone it rejects at once. */
  expect(seq: number): Promise<Answer<Reply>> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise<Answer<Reply>>((resolve, reject) => {
      this.waiters.set(seq, { resolve, reject });
      if (this.options.refWhileWaiting && this.waiters.size === 1) this.endpoint.ref();
    });
  }

  post(message: unknown, transfer?: readonly Transferable[]): void {
    this.endpoint.postMessage(message, transfer);
  }

  request<Request extends { seq: number }>(
    requests: Request[],
    transfer?: readonly Transferable[],
  ): Promise<Answer<Reply>>[] {
    const replies = requests.map((r) => this.expect(r.seq));
    this.post(requests, transfer);
    return replies;
  }

  close(): void {
    this.end(new Error(`${this.options.name} channel closed`));
    if (!(this.endpoint instanceof Worker)) this.endpoint.close();
  }

  private settle(reply: Reply): void {
    const waiter = this.waiters.get(reply.seq);
    if (!waiter) return;
    this.waiters.delete(reply.seq);
    if (this.options.refWhileWaiting && this.waiters.size === 0) this.endpoint.unref();
    if (reply.ok) waiter.resolve(reply as Answer<Reply>);
    else waiter.reject(new Error(reply.error));
  }

  private end(reason: Error): void {
    this.ended ??= reason;
    for (const waiter of this.waiters.values()) waiter.reject(reason);
    this.waiters.clear();
  }
}
