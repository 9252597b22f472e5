import type { FeedbackVerifier } from './feedback.js';

/**
 * Feedback verifiers by provider (see `providerOf`): each checks authenticity the provider's
 * way and normalizes its payload. A provider without one has no feedback endpoint (404).
 */
export const feedbackVerifiers: Record<string, FeedbackVerifier> = {};
