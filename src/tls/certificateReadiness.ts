import type { CheckResult } from '../platform/readiness.js';
import type { AcmeCertificates } from './acmeCertificates.js';
import type { ServedCertificate } from './servedCertificate.js';

/**
 * GET /readyz's `certificates` check: fails only when a listener has no valid certificate at all
 * (tls.acme's first one not obtained yet, or the served one expired). A failed renewal while the
 * certificate is still valid is /metrics' business (postern_certificate_order_failures_total,
 * postern_certificate_expiry_seconds), not a reason to take the node out of service.
 */
export function certificatesReady(
  served: readonly ServedCertificate[],
  now: number,
  acme: AcmeCertificates | null,
): CheckResult {
  const problems: string[] = [];
  for (const certificate of new Set(served)) {
    if (certificate.placeholder) {
      const why =
        acme?.certificate === certificate && acme.lastError
          ? `; the last order failed: ${acme.lastError}`
          : '';
      problems.push(`${certificate.name}: no certificate yet (ACME order pending${why})`);
    } else if (!certificate.validAt(now)) {
      problems.push(
        `${certificate.name}: expired at ${new Date(certificate.pair.notAfter).toISOString()}`,
      );
    }
  }
  return problems.length === 0 ? { ok: true } : { ok: false, detail: problems.join('; ') };
}
