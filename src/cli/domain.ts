import type { DomainCheck } from '../domains/check.js';
import type { CheckedRecord } from '../domains/checkedRecord.js';
import { checkDomain } from '../operator/domains.js';
import { type CommandGroup, str, TextOutput } from './command.js';

const STATE: Record<CheckedRecord['state'], string> = {
  present: 'present',
  missing: 'MISSING',
  different: 'DIFFERENT',
  lookup_failed: 'NO ANSWER',
};

/** The check as a person reads it: each record's state, name and, unless it is present, what to publish. */
function report(check: DomainCheck): string {
  const lines = [
    `${check.domain}: ${check.status.replace('_', ' ')}${check.projects.length ? ` (projects ${check.projects.join(', ')})` : ''}`,
    '',
  ];
  for (const r of check.records) {
    lines.push(
      `${STATE[r.state].padEnd(10)} ${r.purpose.padEnd(12)} ${r.type.padEnd(5)} ${r.name}`,
    );
    if (r.state !== 'present') {
      for (const f of r.found) lines.push(`${' '.repeat(11)}found:   ${f}`);
      lines.push(
        `${' '.repeat(11)}publish: ${r.value}${r.value_exact ? '' : "   (the provider's own value: see below)"}`,
      );
      if (!r.value_exact && r.note) lines.push(`${' '.repeat(11)}${r.note}`);
    }
    for (const p of r.problems) lines.push(`${' '.repeat(11)}${p.severity}: ${p.message}`);
  }
  if (check.notes.length > 0) {
    lines.push('', 'Not checked:');
    for (const n of check.notes) lines.push(`  - ${n.slug ? `${n.slug}: ` : ''}${n.text}`);
  }
  return `${lines.join('\n')}\n`;
}

export const domainCommands: CommandGroup = {
  check: {
    usage: 'domain check DOMAIN [--project ID]',
    help: () =>
      [
        'Looks up the DNS records DOMAIN needs and says of each: present, MISSING or DIFFERENT (with the value to',
        'publish), or NO ANSWER (the lookup failed). The records: a DKIM TXT record for each active key that signs',
        "its mail, SPF with the includes of the attached providers, DMARC, and each provider's bounce-domain and",
        "verification records. --project ID: that project's needs; without it, those of every project that signs",
        "for DOMAIN or has sent from it. Resolvers: the config's dns.servers, else the system's. --json prints the",
        "console API's DomainCheck (docs/domains.md).",
      ].join('\n'),
    options: { project: { type: 'string' } },
    positionals: ['DOMAIN'],
    run: async (ctx, v, [domain]) => {
      const check = await checkDomain(ctx, domain, { projectId: str(v.project) });
      return v.json ? check : new TextOutput([report(check)]);
    },
  },
};
