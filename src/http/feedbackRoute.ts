import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock.js';
import type { PosternConfig } from '../config/load.js';
import { ContractError } from '../contract/errors.js';
import type { FeedbackIntake } from '../delivery/feedback.js';
import type { Logger } from '../log.js';
import type { InflightBudget } from '../platform/inflightBudget.js';
import type { TrustedProxies } from '../platform/trustedProxies.js';
import type { Admission } from '../policy/admission.js';
import type { FeedbackContext } from '../providers/feedback.js';
import { feedbackVerifierFor } from '../providers/registry.js';
import { readRequestBody } from './requestBody.js';
import { sendJson } from './respond.js';

export interface FeedbackDeps {
  feedback: FeedbackIntake;
  admission: Admission;
  clock: Clock;
  logger: Logger;
  config: Pick<PosternConfig, 'feedback'>;
  bodyBudget: InflightBudget;
  proxies: TrustedProxies;
}

/** `POST /v1/feedback/<account id>[/<token>]`: the provider's authenticity check first; anything else is a 4xx that changes nothing. */
export function createFeedbackHandler(deps: FeedbackDeps) {
  const { feedback, admission, clock, logger, config, bodyBudget, proxies } = deps;
  const log = logger.child({ component: 'feedback' });
  return async (
    req: IncomingMessage & { params?: Record<string, string> },
    res: ServerResponse,
  ): Promise<void> => {
    // Unauthenticated notifications count in the same tight per-IP window as bad API keys.
    const ip = proxies.clientAddress(req);
    await admission.admitUnauthenticated(ip);
    const accountId = req.params?.account ?? '';
    const account = await feedback.account(accountId);
    const verifier = account ? feedbackVerifierFor(account.slug) : undefined;
    if (!account || !verifier) {
      await admission.recordUnauthenticatedFailure(ip);
      throw new ContractError('not_found', { message: 'No feedback endpoint here.' });
    }
    // Raw bytes: signatures are over the exact bytes.
    const rawBody = await readRequestBody(req, res, config.feedback.max_body_bytes, bodyBudget);
    // Checked now, recorded only where the feedback is applied: a notification that fails to apply can come again.
    const onceKeys: string[] = [];
    const ctx: FeedbackContext = {
      clock,
      logger: log,
      config: config.feedback,
      rememberOnce: async (acct, key) => {
        const receipt = `once:${key}`;
        if (onceKeys.includes(receipt) || (await feedback.onceKeyUsed(acct.id, receipt)))
          return false;
        onceKeys.push(receipt);
        return true;
      },
    };
    const verdict = await verifier.verify(
      { headers: req.headers, rawBody, token: req.params?.token ?? null, url: req.url ?? '/' },
      account,
      ctx,
    );
    if (!verdict.ok) {
      if (verdict.code !== 'feedback:malformed') await admission.recordUnauthenticatedFailure(ip);
      log.warn(
        {
          provider_account_id: account.id,
          slug: account.slug,
          code: verdict.code,
          reason: verdict.reason,
          ip,
        },
        'provider feedback refused',
      );
      throw new ContractError(verdict.code, { message: verdict.reason });
    }
    const tally = await feedback.apply(account, verdict.items, clock.now(), log, onceKeys);
    if (tally.received > 0 || verdict.note)
      log.info(
        { provider_account_id: account.id, ...tally, note: verdict.note },
        'provider feedback applied',
      );
    sendJson(res, 200, { ...tally, ...(verdict.note ? { note: verdict.note } : {}) });
  };
}
