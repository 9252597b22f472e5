import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(boundPort(server.address()));
    });
  });
}

function boundPort(address: AddressInfo | string | null): number {
  if (address === null || typeof address === 'string')
    throw new Error('the listener has no TCP port');
  return address.port;
}

/** The common first-start failure: say so. */
export function listenError(err: unknown): unknown {
  if (
    err instanceof Error &&
    'code' in err &&
    err.code === 'EACCES' &&
    'port' in err &&
    typeof err.port === 'number' &&
    err.port < 1024
  ) {
    const address = String('address' in err ? err.address : undefined);
    return new Error(
      `cannot listen on ${address}:${err.port}: ports below 1024 need root or CAP_NET_BIND_SERVICE; change the port in the config or set ${'POSTERN_LISTEN_<NAME>'}=host:port`,
    );
  }
  return err;
}

const SHUTDOWN_GRACE_MS = 10_000;

/** Whatever is still open after the grace period is cut: its request was never acknowledged. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS);
    force.unref();
    server.on('request', (_req, res: ServerResponse) => res.setHeader('Connection', 'close'));
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
