/**
 * A private Postfix instance for one bench run, the anchor Postern's figures are compared with
 * (bench/postfixComparison.ts): its own `config_directory` (main.cf and master.cf written here),
 * and its queue and data directories in the bench's temp directory, on the same filesystem as
 * Postern's state directories. `postfix -c DIR start` / `stop`; each phase gets a fresh queue.
 *
 * What it is set up as (Postfix's defaults otherwise: `default_process_limit` 100,
 * `smtp_destination_concurrency_limit` 20, `in_flow_delay` 1s except while delivery is held):
 * - smtpd on a free port of 127.0.0.1 (`127.0.0.1:PORT inet n - n - - smtpd`), every service
 *   with chroot off, `inet_protocols = ipv4`, no local delivery (`mydestination` empty);
 * - STARTTLS (`smtpd_tls_security_level = may`) with the bench's certificate, the pair Postern's
 *   bench servers use (benchCertificate), and AUTH PLAIN over Cyrus SASL with a sasldb in the
 *   config directory (`cyrus_sasl_config_path`, `sasldb_path`), only after STARTTLS
 *   (`smtpd_tls_auth_only`), relaying only for an authenticated client: what Postern requires.
 *   `sasl2-bin` and `libsasl2-modules` are installed when missing and the bench is root; if
 *   AUTH still fails, Postfix runs with STARTTLS alone and says so;
 * - `relayhost = [127.0.0.1]:SINKPORT`, the sink Postern's relay bench uses (relay.ts startSink);
 * - logging to a file in the bench directory through postlogd (`maillog_file`): this machine has
 *   no syslog, and Postern's bench servers log to a file too.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { tempStateDir } from '../test/support/postern.js';
import {
  type BenchCertificate,
  cpuSeconds,
  exitOnSignal,
  onBenchExit,
  procStat,
  removeAfterBench,
} from './benchServer.js';
import { freePort, waitForPort } from './relay.js';
import { openBenchSession, type SmtpCredentials } from './smtpClient.js';

const POSTFIX = '/usr/sbin/postfix';
const SASLPASSWD2 = '/usr/sbin/saslpasswd2';
const SASL_REALM = 'bench.test';

/**
 * How Postfix's delivery is held while its ingest is measured (`BENCH_POSTFIX_INGEST`):
 * `no-qmgr` (default): the queue manager is not started and `in_flow_delay` is 0, so queue
 *   files stay in `incoming` as Postern's messages stay queued with `delivery.enabled` false.
 *   (`in_flow_delay` paces smtpd by the queue manager's deliveries: with none, each message
 *   would wait the full 1 s.)
 * `defer`: `defer_transports = smtp`, the queue manager running: every message is also moved to
 *   the deferred queue with a defer log, work Postern's ingest phase does not do.
 * `deliver`: delivery on, to the sink.
 */
export type IngestHold = 'no-qmgr' | 'defer' | 'deliver';
export const INGEST_HOLD = (process.env.BENCH_POSTFIX_INGEST ?? 'no-qmgr') as IngestHold;
if (!['no-qmgr', 'defer', 'deliver'].includes(INGEST_HOLD))
  throw new Error(`BENCH_POSTFIX_INGEST=${INGEST_HOLD}: one of no-qmgr, defer, deliver`);

/** What the ingest phase's Postfix does about delivery, for the report. */
export const INGEST_HOLD_TEXT: Record<IngestHold, string> = {
  'no-qmgr': 'delivery held: no queue manager, in_flow_delay 0',
  defer: 'delivery held: defer_transports = smtp',
  deliver: 'delivering to the sink meanwhile',
};

export interface PostfixPhase {
  /** Where the smtp client relays to (the sink's port). */
  sinkPort: number;
  /** false: delivery held as INGEST_HOLD says. */
  delivery: boolean;
}

/** Null when a private instance can run here, else why not. */
export function postfixUnavailable(): string | null {
  if (!existsSync(POSTFIX)) return 'Postfix is not installed (apt-get install postfix)';
  if (process.getuid?.() !== 0) return 'the bench is not root (a Postfix instance starts as root)';
  return null;
}

function run(command: string, args: string[], input?: string): { ok: boolean; output: string } {
  const r = spawnSync(command, args, {
    encoding: 'utf8',
    input,
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  exitOnSignal(r.signal);
  return {
    ok: r.status === 0,
    output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`.trim(),
  };
}

/** saslpasswd2 and the sasldb/PLAIN plugins, installed as the test prerequisites are (scripts/test-prerequisites.mjs); null when present, else why not. */
function ensureSaslPackages(): string | null {
  const present = () =>
    existsSync(SASLPASSWD2) &&
    /\bsasldb\b/.test(run('saslpluginviewer', []).output) &&
    /\bPLAIN\b/.test(run('saslpluginviewer', []).output);
  if (present()) return null;
  if (!existsSync('/usr/bin/apt-get'))
    return 'sasl2-bin and libsasl2-modules are missing and there is no apt-get';
  process.stderr.write(
    'Installing sasl2-bin and libsasl2-modules for the Postfix comparison (Cyrus SASL with a sasldb)\n',
  );
  const installed = run('sh', [
    '-c',
    'apt-get update -qq && apt-get install -y -qq --no-install-recommends sasl2-bin libsasl2-modules >/dev/null',
  ]);
  if (!installed.ok)
    return `installing sasl2-bin failed: ${installed.output.split('\n').slice(-2).join(' ')}`;
  return present() ? null : 'sasl2-bin installed, but the sasldb or PLAIN plugin is still missing';
}

/** Synchronous sleep: stop() runs in the exit handler too, where nothing asynchronous does. */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Files under `dir`, recursively (the deferred queue is hashed into subdirectories). */
function countFiles(dir: string): number {
  if (!existsSync(dir)) return 0;
  let n = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true }))
    n += entry.isDirectory() ? countFiles(`${dir}/${entry.name}`) : 1;
  return n;
}

export class PostfixInstance {
  readonly configDir: string;
  private readonly dataDir: string;
  private readonly logFile: string;
  private queueDir = '';
  private phases = 0;
  private masterPid: number | null = null;
  /** AUTH PLAIN's user and password; null when Postfix runs with STARTTLS alone. */
  credentials: SmtpCredentials = null;
  /** What the client does against this instance, for the report (and why AUTH is off, if it is). */
  security = 'STARTTLS, no AUTH';
  port = 0;

  private constructor(
    readonly dir: string,
    readonly version: string,
    private readonly certificate: BenchCertificate,
  ) {
    this.configDir = `${dir}/config`;
    this.dataDir = `${dir}/data`;
    this.logFile = `${dir}/maillog`;
  }

  /**
   * The instance's directories and AUTH, checked by one real session: the caller gets an
   * instance whose sessions work (AUTH on if it could be made to work), or an error.
   */
  static async create(certificate: BenchCertificate): Promise<PostfixInstance> {
    const dir = tempStateDir('postern-bench-postfix-');
    removeAfterBench(dir);
    // Postfix's daemons run as the postfix user and must reach into the queue below.
    chmodSync(dir, 0o755);
    const version = run('/usr/sbin/postconf', ['-d', '-h', 'mail_version']).output;
    const instance = new PostfixInstance(dir, version, certificate);
    onBenchExit(() => instance.stop());
    mkdirSync(`${instance.configDir}/sasl`, { recursive: true, mode: 0o755 });
    mkdirSync(instance.dataDir, { mode: 0o755 });
    const postfixUser = lookupUser('postfix');
    if (!postfixUser) throw new Error('no postfix user on this machine (mail_owner)');
    chownSync(instance.dataDir, postfixUser.uid, postfixUser.gid);
    const whyNoAuth = instance.setUpSasl(postfixUser.gid);
    if (!whyNoAuth) {
      instance.credentials = {
        user: `bench@${SASL_REALM}`,
        password: randomBytes(18).toString('base64url'),
      };
      instance.writeSasldb(instance.credentials.password, postfixUser.gid);
    }
    // One session against a started instance says whether AUTH works; without it, start again without AUTH.
    const probe = await instance.probe();
    if (probe === null) {
      instance.security = 'STARTTLS + AUTH PLAIN (Cyrus SASL, sasldb)';
      return instance;
    }
    const reason = whyNoAuth ?? `AUTH failed: ${probe}`;
    instance.credentials = null;
    const plain = await instance.probe();
    if (plain !== null) throw new Error(`Postfix sessions fail even without AUTH: ${plain}`);
    instance.security = `STARTTLS, no AUTH (${reason})`;
    return instance;
  }

  /** Starts a phase's instance, opens one session (STARTTLS, AUTH if on), stops; the failure, or null. */
  private async probe(): Promise<string | null> {
    await this.start({ sinkPort: 9, delivery: false });
    try {
      const client = await openBenchSession('127.0.0.1', this.port, this.credentials);
      await client.quit();
      return null;
    } catch (err) {
      return (err as Error).message.replace(/\s+/g, ' ').slice(0, 200);
    } finally {
      this.stop();
    }
  }

  /** The sasldb's smtpd.conf; null when Cyrus SASL is usable, else why not. */
  private setUpSasl(postfixGid: number): string | null {
    const missing = ensureSaslPackages();
    if (missing) return missing;
    const saslDir = `${this.configDir}/sasl`;
    writeFileSync(
      `${saslDir}/smtpd.conf`,
      `pwcheck_method: auxprop\nauxprop_plugin: sasldb\nmech_list: PLAIN\nsasldb_path: ${saslDir}/sasldb2\n`,
    );
    chownSync(saslDir, 0, postfixGid);
    return null;
  }

  private writeSasldb(password: string, postfixGid: number): void {
    const db = `${this.configDir}/sasl/sasldb2`;
    const made = run(SASLPASSWD2, ['-p', '-c', '-f', db, '-u', SASL_REALM, 'bench'], password);
    if (!made.ok) throw new Error(`saslpasswd2: ${made.output}`);
    // smtpd reads it as the postfix user; nobody else may.
    chownSync(db, 0, postfixGid);
    chmodSync(db, 0o640);
  }

  private mainCf(phase: PostfixPhase): string {
    const auth = this.credentials !== null;
    const held = !phase.delivery;
    const lines = [
      '# Written by bench/postfix.ts for one bench run; removed with the bench temp directory.',
      'compatibility_level = 3.6',
      `queue_directory = ${this.queueDir}`,
      `data_directory = ${this.dataDir}`,
      'mail_owner = postfix',
      'setgid_group = postdrop',
      `maillog_file = ${this.logFile}`,
      `maillog_file_prefixes = ${this.dir}`,
      'myhostname = postfix.bench.test',
      'mydomain = bench.test',
      'myorigin = $myhostname',
      '# No local delivery: nothing is addressed to this host.',
      'mydestination =',
      'local_transport = error:local delivery is disabled',
      'alias_maps =',
      'alias_database =',
      'inet_interfaces = 127.0.0.1',
      'inet_protocols = ipv4',
      'mynetworks = 127.0.0.0/8',
      `relayhost = [127.0.0.1]:${phase.sinkPort}`,
      'smtpd_tls_security_level = may',
      `smtpd_tls_cert_file = ${this.certificate.certPath}`,
      `smtpd_tls_key_file = ${this.certificate.keyPath}`,
      ...(auth
        ? [
            'smtpd_tls_auth_only = yes',
            'smtpd_sasl_auth_enable = yes',
            'smtpd_sasl_type = cyrus',
            'smtpd_sasl_path = smtpd',
            `cyrus_sasl_config_path = ${this.configDir}/sasl`,
            `smtpd_sasl_local_domain = ${SASL_REALM}`,
            '# Relaying for an authenticated client only, as Postern accepts nothing before AUTH.',
            'smtpd_relay_restrictions = permit_sasl_authenticated, reject_unauth_destination',
          ]
        : ['smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination']),
      ...(held && INGEST_HOLD === 'no-qmgr'
        ? [
            '# No queue manager runs: nothing would ever hand smtpd a flow token.',
            'in_flow_delay = 0',
          ]
        : []),
      ...(held && INGEST_HOLD === 'defer' ? ['defer_transports = smtp'] : []),
    ];
    return `${lines.join('\n')}\n`;
  }

  private masterCf(phase: PostfixPhase): string {
    const withoutQmgr = !phase.delivery && INGEST_HOLD === 'no-qmgr';
    // Debian's master.cf, the services a relay needs, chroot off.
    const services = [
      `127.0.0.1:${this.port} inet n - n - - smtpd`,
      'cleanup unix n - n - 0 cleanup',
      ...(withoutQmgr ? [] : ['qmgr unix n - n 300 1 qmgr']),
      'tlsmgr unix - - n 1000? 1 tlsmgr',
      'rewrite unix - - n - - trivial-rewrite',
      'bounce unix - - n - 0 bounce',
      'defer unix - - n - 0 bounce',
      'trace unix - - n - 0 bounce',
      'verify unix - - n - 1 verify',
      'flush unix n - n 1000? 0 flush',
      'proxymap unix - - n - - proxymap',
      'smtp unix - - n - - smtp',
      'relay unix - - n - - smtp',
      'error unix - - n - - error',
      'retry unix - - n - - error',
      'discard unix - - n - - discard',
      'anvil unix - - n - 1 anvil',
      'scache unix - - n - 1 scache',
      'postlog unix-dgram n - n - 1 postlogd',
    ];
    return `${services.join('\n')}\n`;
  }

  /** Writes the phase's config and a fresh queue directory, starts the instance, waits for smtpd's port. */
  async start(phase: PostfixPhase): Promise<void> {
    if (this.masterPid !== null) throw new Error('Postfix instance already running');
    this.queueDir = `${this.dir}/queue-${++this.phases}`;
    mkdirSync(this.queueDir, { mode: 0o755 });
    this.port = await freePort();
    writeFileSync(`${this.configDir}/main.cf`, this.mainCf(phase));
    writeFileSync(`${this.configDir}/master.cf`, this.masterCf(phase));
    const started = run(POSTFIX, ['-c', this.configDir, 'start']);
    this.masterPid = this.readMasterPid();
    if (!started.ok || this.masterPid === null) {
      this.stop();
      throw new Error(
        `postfix -c ${this.configDir} start failed: ${started.output} ${this.logTail()}`,
      );
    }
    const master = this.masterPid;
    await waitForPort(this.port, 'Postfix smtpd', () =>
      procStat(master) === null ? `master exited; ${this.logTail()}` : null,
    );
  }

  /** The running master of this instance (from its lock file, checked against the process's MAIL_CONFIG), or null. */
  private readMasterPid(): number | null {
    try {
      const pid = Number(readFileSync(`${this.dataDir}/master.lock`, 'utf8').trim());
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
      return pid > 0 && environ.split('\0').includes(`MAIL_CONFIG=${this.configDir}`) ? pid : null;
    } catch {
      return null;
    }
  }

  /** The last lines of the instance's log, for an error message. */
  logTail(lines = 5): string {
    try {
      return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-lines).join(' | ');
    } catch {
      return '(no log)';
    }
  }

  /** Live (not zombie) processes of the instance: its master's process group, which every daemon it starts stays in. */
  processes(): number[] {
    if (this.masterPid === null) return [];
    return this.group()
      .filter((p) => p.state !== 'Z')
      .map((p) => p.pid);
  }

  private group(): { pid: number; state: string }[] {
    const found: { pid: number; state: string }[] = [];
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const fields = procStat(Number(name));
      if (fields && Number(fields[2]) === this.masterPid)
        found.push({ pid: Number(name), state: fields[0] });
    }
    return found;
  }

  /**
   * CPU seconds of the whole instance so far: master, smtpd, cleanup, qmgr, smtp,
   * trivial-rewrite, … (each with the CPU of its children it has reaped: a daemon that exits
   * after `max_use` moves into its master's figure, so the sum never drops).
   */
  cpuSeconds(): number {
    return this.group().reduce((sum, p) => sum + (cpuSeconds(p.pid, true) || 0), 0);
  }

  /** Queue files of the current phase (incoming, active, deferred, hold). */
  queuedFiles(): number {
    return ['incoming', 'active', 'deferred', 'hold'].reduce(
      (n, q) => n + countFiles(`${this.queueDir}/${q}`),
      0,
    );
  }

  /** `postfix stop`, then waits until every process of the instance is gone (SIGKILL to the group after 10 s). Synchronous: also the exit handler. */
  stop(): void {
    // Also a master whose start was interrupted before its pid was read.
    this.masterPid ??= this.readMasterPid();
    if (this.masterPid === null) return;
    const master = this.masterPid;
    run(POSTFIX, ['-c', this.configDir, 'stop']);
    for (let waited = 0; this.processes().length > 0; waited += 50) {
      if (waited >= 10_000) {
        try {
          process.kill(-master, 'SIGKILL');
        } catch {
          // Gone meanwhile.
        }
        break;
      }
      sleepSync(50);
    }
    this.masterPid = null;
  }
}

function lookupUser(name: string): { uid: number; gid: number } | null {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) return null;
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}
