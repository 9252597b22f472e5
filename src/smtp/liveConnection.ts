import type { Socket } from 'node:net';
import type { SMTPServer, SMTPServerSession } from 'smtp-server';

export interface LiveConnection {
  session: SMTPServerSession;
  send(code: number, text: string, context?: unknown): void;
  close(): void;
  _socket?: Socket;
}

/** smtp-server's open connections, which its types do not declare. */
export function liveConnections(server: SMTPServer): Set<LiveConnection> {
  return (server as unknown as { connections: Set<LiveConnection> }).connections;
}

/** Replies of one pipelined pass leave in one write: over TLS each write is its own record and syscall. */
export function coalesceReplies(connection: LiveConnection): void {
  const send = connection.send.bind(connection);
  connection.send = (code, text, context) => {
    const socket = connection._socket;
    if (socket && !socket.writableCorked) {
      socket.cork();
      process.nextTick(() => socket.uncork());
    }
    send(code, text, context);
  };
}
