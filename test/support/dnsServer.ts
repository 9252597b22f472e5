/**
 * A small authoritative DNS server for tests (RFC 1035 over UDP, and TCP for answers too big
 * for a datagram), answering TXT, MX and CNAME questions from a table the test changes as it
 * goes: a name it does not hold is NXDOMAIN, a name held without the asked type is an empty
 * answer, a CNAME is answered (and followed within the table) for any type, and a name marked
 * failing is SERVFAIL. Node's resolver (`dns.servers: ["127.0.0.1:PORT"]`) asks it like any.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:net';

type RecordType = 'TXT' | 'MX' | 'CNAME';
interface Entry {
  TXT?: string[];
  MX?: { priority: number; exchange: string }[];
  CNAME?: string;
}

const TYPE = { A: 1, CNAME: 5, MX: 15, TXT: 16, OPT: 41 } as const;
const NOERROR = 0;
const SERVFAIL = 2;
const NXDOMAIN = 3;

const key = (name: string) => name.toLowerCase().replace(/\.$/, '');

function encodeName(name: string): Buffer {
  const parts = key(name)
    .split('.')
    .filter(Boolean)
    .map((label) => {
      const bytes = Buffer.from(label, 'ascii');
      return Buffer.concat([Buffer.from([bytes.length]), bytes]);
    });
  return Buffer.concat([...parts, Buffer.from([0])]);
}

/** A TXT record's character-strings: the value in pieces of at most 255 bytes. */
function txtData(value: string): Buffer {
  const bytes = Buffer.from(value, 'utf8');
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length || i === 0; i += 255) {
    const piece = bytes.subarray(i, i + 255);
    pieces.push(Buffer.from([piece.length]), piece);
  }
  return Buffer.concat(pieces);
}

function resourceRecord(owner: Buffer, type: number, data: Buffer): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(type, 0);
  fixed.writeUInt16BE(1, 2); // IN
  fixed.writeUInt32BE(60, 4);
  fixed.writeUInt16BE(data.length, 8);
  return Buffer.concat([owner, fixed, data]);
}

/** The question of a query: its bytes as sent (the answer echoes them), its name and type. */
function parseQuestion(
  query: Buffer,
): { end: number; name: string; type: number; udpSize: number } | null {
  if (query.length < 12 || query.readUInt16BE(4) !== 1) return null;
  let i = 12;
  const labels: string[] = [];
  while (i < query.length && query[i] !== 0) {
    const len = query[i];
    labels.push(query.subarray(i + 1, i + 1 + len).toString('ascii'));
    i += len + 1;
  }
  const type = query.readUInt16BE(i + 1);
  const end = i + 5;
  // An EDNS OPT record in the additional section says how big a datagram the client takes.
  let udpSize = 512;
  if (
    query.readUInt16BE(10) > 0 &&
    end + 11 <= query.length &&
    query[end] === 0 &&
    query.readUInt16BE(end + 1) === TYPE.OPT
  )
    udpSize = Math.max(512, query.readUInt16BE(end + 3));
  return { end, name: labels.join('.'), type, udpSize };
}

export class DnsServer {
  private readonly table = new Map<string, Entry>();
  private readonly failing = new Set<string>();
  /** Every question asked, `TYPE name`, in order. */
  readonly asked: string[] = [];
  private readonly sockets = new Set<import('node:net').Socket>();

  private constructor(
    private readonly udp: Socket,
    private readonly tcp: Server,
    readonly port: number,
  ) {}

  /** A server on 127.0.0.1, UDP and TCP on one free port. */
  static async start(): Promise<DnsServer> {
    for (let attempt = 0; ; attempt++) {
      const udp = createSocket('udp4');
      await new Promise<void>((resolve, reject) =>
        udp.once('error', reject).bind(0, '127.0.0.1', () => resolve()),
      );
      const port = (udp.address() as AddressInfo).port;
      const tcp = createServer();
      try {
        await new Promise<void>((resolve, reject) =>
          tcp.once('error', reject).listen(port, '127.0.0.1', () => resolve()),
        );
      } catch (err) {
        udp.close();
        if (attempt < 5) continue;
        throw err;
      }
      const server = new DnsServer(udp, tcp, port);
      udp.on('message', (msg, peer) => {
        const answer = server.answer(msg, true);
        if (answer) udp.send(answer, peer.port, peer.address);
      });
      tcp.on('connection', (socket) => {
        server.sockets.add(socket);
        socket.on('close', () => server.sockets.delete(socket));
        let buffered = Buffer.alloc(0);
        socket.on('data', (chunk) => {
          buffered = Buffer.concat([buffered, chunk]);
          while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
            const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
            buffered = buffered.subarray(2 + msg.length);
            const answer = server.answer(msg, false);
            if (answer)
              socket.write(
                Buffer.concat([Buffer.from([answer.length >> 8, answer.length & 0xff]), answer]),
              );
          }
        });
        socket.on('error', () => undefined);
      });
      return server;
    }
  }

  /** What `dns.servers` holds to ask this server. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Sets a name's records of one type (replacing them); TXT values are whole records (split into strings on the wire). */
  set(name: string, type: 'TXT', values: string[]): this;
  set(name: string, type: 'MX', values: { priority: number; exchange: string }[]): this;
  set(name: string, type: 'CNAME', value: string): this;
  set(name: string, type: RecordType, values: unknown): this {
    const entry = this.table.get(key(name)) ?? {};
    (entry as Record<string, unknown>)[type] = values;
    this.table.set(key(name), entry);
    return this;
  }

  /** Removes a name's records of one type, or the name. */
  remove(name: string, type?: RecordType): this {
    if (type) delete this.table.get(key(name))?.[type];
    else this.table.delete(key(name));
    return this;
  }

  /** Answers SERVFAIL for the name (or stops doing so). */
  fail(name: string, failing = true): this {
    if (failing) this.failing.add(key(name));
    else this.failing.delete(key(name));
    return this;
  }

  private answer(query: Buffer, overUdp: boolean): Buffer | null {
    const q = parseQuestion(query);
    if (!q) return null;
    const name = key(q.name);
    const typeName =
      (Object.keys(TYPE) as (keyof typeof TYPE)[]).find((k) => TYPE[k] === q.type) ??
      String(q.type);
    this.asked.push(`${typeName} ${name}`);
    const answers: Buffer[] = [];
    let rcode = NOERROR;
    if (this.failing.has(name)) rcode = SERVFAIL;
    else if (!this.table.has(name)) rcode = NXDOMAIN;
    else {
      // Follow CNAMEs within the table (at most 8), each link answered.
      let owner = name;
      for (let hops = 0; hops < 8; hops++) {
        const entry = this.table.get(owner);
        if (!entry) break;
        if (entry.CNAME && q.type !== TYPE.CNAME) {
          answers.push(resourceRecord(encodeName(owner), TYPE.CNAME, encodeName(entry.CNAME)));
          owner = key(entry.CNAME);
          continue;
        }
        if (q.type === TYPE.CNAME && entry.CNAME)
          answers.push(resourceRecord(encodeName(owner), TYPE.CNAME, encodeName(entry.CNAME)));
        if (q.type === TYPE.TXT)
          for (const v of entry.TXT ?? [])
            answers.push(resourceRecord(encodeName(owner), TYPE.TXT, txtData(v)));
        if (q.type === TYPE.MX) {
          for (const mx of entry.MX ?? []) {
            const pref = Buffer.alloc(2);
            pref.writeUInt16BE(mx.priority);
            answers.push(
              resourceRecord(
                encodeName(owner),
                TYPE.MX,
                Buffer.concat([pref, encodeName(mx.exchange)]),
              ),
            );
          }
        }
        break;
      }
    }
    const header = Buffer.alloc(12);
    header.writeUInt16BE(query.readUInt16BE(0), 0);
    const rd = query[2] & 0x01;
    header[2] = 0x80 | 0x04 | rd; // QR, AA, RD as asked
    header[3] = 0x80 | rcode; // RA
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const question = query.subarray(12, q.end);
    const full = Buffer.concat([header, question, ...answers]);
    if (overUdp && full.length > q.udpSize) {
      // Too big for the datagram: truncated (TC), and the client asks again over TCP.
      header[2] |= 0x02;
      header.writeUInt16BE(0, 6);
      return Buffer.concat([header, question]);
    }
    return full;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.udp.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.tcp.close(() => resolve()));
  }
}
