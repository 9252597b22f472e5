import type { FeedbackVerifier } from './feedback.js';
import { brevoVerifier } from './feedback/brevo.js';
import { mailgunVerifier } from './feedback/mailgun.js';
import { postmarkVerifier } from './feedback/postmark.js';
import { resendFeedback } from './feedback/resend.js';
import { sesFeedbackVerifier } from './feedback/ses.js';
import { sendgridFeedback } from './feedback/sendgrid.js';

/**
 * Feedback verifiers by provider (see `providerOf`): each checks authenticity the provider's
 * way and normalizes its payload. A provider without one has no feedback endpoint (404).
 */
export const feedbackVerifiers: Record<string, FeedbackVerifier> = {
  'provider-a': sesFeedbackVerifier,
  'provider-b': sendgridFeedback,
  'provider-c': mailgunVerifier,
  'provider-d': resendFeedback,
  'provider-e': postmarkVerifier,
  'provider-f': brevoVerifier,
};
