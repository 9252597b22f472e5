#!/usr/bin/env node
// Run by `npm test` before the suite: the real programs the tests talk to (swaks as an SMTP
// client, Postfix's smtp-sink as a next hop and Postfix itself with a Cyrus sasldb as the bench's
// anchor, python3-dkim as an independent DKIM verifier,
// chromium as the web console's browser, driven by playwright-core, which downloads none,
// PostgreSQL's server binaries, from which the tests start a private instance, Pebble as an
// ACME CA)
// come from Debian packages. Missing ones are installed when this runs as root with apt-get;
// otherwise it prints the one command that installs them and fails, before any test runs.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';

/** Each need: how to tell it is there, and the Debian packages that provide it. */
const needs = [
  { what: 'swaks (SMTP client)', present: () => onPath('swaks'), packages: ['swaks'] },
  {
    what: "swaks's TLS modules",
    present: () => spawnSync('perl', ['-MIO::Socket::SSL', '-MNet::SSLeay', '-e', '1'], { stdio: 'ignore' }).status === 0,
    packages: ['libio-socket-ssl-perl', 'libnet-ssleay-perl'],
  },
  { what: "Postfix's smtp-sink and smtp-source", present: () => existsSync('/usr/sbin/smtp-sink') && existsSync('/usr/sbin/smtp-source'), packages: ['postfix'] },
  // The bench's private Postfix instance authenticates against a Cyrus sasldb (test/bench/postfix.test.ts).
  { what: "Cyrus SASL's sasldb tools", present: () => existsSync('/usr/sbin/saslpasswd2'), packages: ['sasl2-bin', 'libsasl2-modules'] },
  { what: 'python3-dkim (DKIM verifier)', present: () => spawnSync('/usr/bin/python3', ['-c', 'import dkim'], { stdio: 'ignore' }).status === 0, packages: ['python3-dkim'] },
  // A font, so pages render text the same on a bare machine (and screenshots are legible).
  { what: 'chromium (web console tests)', present: () => existsSync('/usr/lib/chromium/chromium') && existsSync('/usr/share/fonts/truetype/liberation'), packages: ['chromium', 'fonts-liberation'] },
  // initdb and pg_ctl in Debian's versioned directory (test/support/postgres.ts finds the newest);
  // not needed when the tests are given a server (POSTERN_TEST_DATABASE_URL).
  { what: 'PostgreSQL server (initdb, pg_ctl)', present: () => Boolean(process.env.POSTERN_TEST_DATABASE_URL) || postgresInstalled(), packages: ['postgresql'] },
  // Let's Encrypt's ACME test server and its DNS, for tls.acme (test/support/pebble.ts).
  { what: 'Pebble (ACME test server) and pebble-challtestsrv', present: () => existsSync('/usr/bin/pebble') && existsSync('/usr/bin/pebble-challtestsrv'), packages: ['pebble'] },
];

/** Whether some /usr/lib/postgresql/<version>/bin holds initdb and pg_ctl. */
function postgresInstalled() {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return false;
  return readdirSync(root).some((version) => existsSync(`${root}/${version}/bin/initdb`) && existsSync(`${root}/${version}/bin/pg_ctl`));
}

function onPath(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

const missing = needs.filter((n) => !n.present());
if (missing.length === 0) process.exit(0);

const packages = [...new Set(missing.flatMap((n) => n.packages))];
const names = missing.map((n) => n.what).join(', ');
// "No configuration": the package's programs without a mail daemon configured or started.
const preseed = 'echo "postfix postfix/main_mailer_type select No configuration" | debconf-set-selections';
const install = `apt-get install -y -qq --no-install-recommends ${packages.join(' ')}`;

if (process.getuid?.() !== 0 || !onPath('apt-get')) {
  process.stderr.write(`The tests need ${names}, which are missing. Install them with:\n\n  sudo sh -c '${preseed.replaceAll("'", "'\\''")} && apt-get update && ${install}'\n\n`);
  process.exit(1);
}

process.stderr.write(`Installing what the tests need (${names}): ${packages.join(' ')}\n`);
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
execFileSync('sh', ['-c', `${preseed} && apt-get update -qq && ${install} >/dev/null`], { stdio: 'inherit', env });
const still = needs.filter((n) => !n.present());
if (still.length > 0) {
  process.stderr.write(`Still missing after the install: ${still.map((n) => n.what).join(', ')}\n`);
  process.exit(1);
}
