import type { Status } from './types.gen.js';

/* The one statement of the message lifecycle; the diagram in docs/architecture.md#message-states is generated from it. */

/** States in which a message may still be sent, and so still needs its MIME file. */
export const LIVE_STATUSES = ['queued', 'scheduled', 'paused', 'captured', 'sending'] as const;

/** Never left for a live one; retention removes only these. */
export const FINISHED_STATUSES = [
  'sent',
  'delivered',
  'bounced',
  'complained',
  'failed',
  'suppressed',
  'cancelled',
] as const;

/** In the order the console and the CLI list them. */
export const MESSAGE_STATUSES = [...LIVE_STATUSES, ...FINISHED_STATUSES] as const;

export type MessageStatus = (typeof MESSAGE_STATUSES)[number];

export const STATUS_MEANINGS: Record<MessageStatus, string> = {
  queued: 'to be sent as soon as it is due: now, or at its next attempt on the retry ladder',
  scheduled: 'waits for its `scheduled_at`',
  paused: 'held: the request set `paused`, or its project is paused (`hold_reason`)',
  captured: 'a sandbox send: stored, never forwarded automatically',
  sending: 'leased by the scheduler, being handed to a provider',
  sent: 'a provider took it (a claim of hand-off, not of delivery)',
  delivered: 'the provider confirmed delivery',
  bounced: 'a recipient bounced',
  complained: 'a recipient complained',
  failed:
    'will not be sent (refused for good, expired, its file lost), or a provider reported a failure',
  suppressed: 'every recipient was on the suppression list at hand-off',
  cancelled: 'an operator stopped it before hand-off',
};

export const CAUSES = {
  release: {
    by: 'operator',
    says: '`message release` (CLI, console, bulk); never a message of a deleted project, nor one its still-paused project holds',
  },
  cancel: {
    by: 'operator',
    says: '`message cancel` (CLI, console, bulk): a message not yet handed to a provider stops',
  },
  retry: {
    by: 'operator',
    says: '`message retry` (CLI, console, bulk): a message waiting on the retry ladder is due at once (only while its next attempt is ahead)',
  },
  project_resume: {
    by: 'operator',
    says: '`project resume`: the messages held by the pause (`hold_reason` project) go on',
  },
  lease: {
    by: 'scheduler',
    says: 'due (`next_attempt_at` has come) in a project not paused: leased for hand-off',
  },
  lease_expired: {
    by: 'scheduler',
    says: 'its lease ran out (its worker or node died): leased again, and sent again (at least once)',
  },
  lease_reclaimed: {
    by: 'scheduler',
    says: 'PostgreSQL: a lease committed while the database went away, its answer lost: the node takes back its own leases it holds no hand-off for, renewed, and hands them off',
  },
  hand_off: {
    by: 'scheduler',
    says: 'the outcome of handing it to the candidate providers in turn',
  },
  expire: {
    by: 'scheduler',
    says: 'the expiry sweep: older than `delivery.max_age_seconds` and still not handed off',
  },
  provider_feedback: {
    by: 'provider feedback',
    says: 'a notification about a recipient: the status is the most serious outcome any recipient has had (sent < delivered < failed < bounced < complained), never lowered',
  },
  spool_file_missing: {
    by: 'start-up',
    says: 'SQLite: a live message whose spool file is gone cannot be sent',
  },
  delete: { by: 'operator', says: '`message delete`: the message and everything stored with it' },
  retention: { by: 'housekeeping', says: "past its project's retention" },
} as const satisfies Record<string, { by: string; says: string }>;

export type Cause = keyof typeof CAUSES;

/** `when`: which target the cause picks. */
export interface Transition {
  from: MessageStatus;
  to: MessageStatus;
  cause: Cause;
  when?: string;
}

/** By precedence, most binding first. */
export const ACCEPTANCE = [
  {
    to: 'captured',
    label: 'sandbox',
    when: "a sandbox send (a test key); the answer's `paused` still reports a hold",
  },
  { to: 'paused', label: 'held', when: "held: the request's `paused`, or its project is paused" },
  { to: 'scheduled', label: 'scheduled_at ahead', when: '`scheduled_at` is ahead' },
  { to: 'queued', label: 'otherwise', when: 'otherwise: due now' },
] as const satisfies readonly { to: Status; label: string; when: string }[];

/** A (from, to, cause) not listed here is refused: the writer changes nothing. */
export const TRANSITIONS = [
  { from: 'paused', to: 'queued', cause: 'release', when: 'its `scheduled_at` is not ahead' },
  { from: 'paused', to: 'scheduled', cause: 'release', when: 'its `scheduled_at` is ahead' },
  { from: 'captured', to: 'queued', cause: 'release', when: 'its `scheduled_at` is not ahead' },
  { from: 'captured', to: 'scheduled', cause: 'release', when: 'its `scheduled_at` is ahead' },
  { from: 'queued', to: 'cancelled', cause: 'cancel' },
  { from: 'scheduled', to: 'cancelled', cause: 'cancel' },
  { from: 'paused', to: 'cancelled', cause: 'cancel' },
  { from: 'captured', to: 'cancelled', cause: 'cancel' },
  { from: 'queued', to: 'queued', cause: 'retry', when: 'its next attempt is ahead: now due' },
  {
    from: 'paused',
    to: 'queued',
    cause: 'project_resume',
    when: 'its `scheduled_at` is not ahead',
  },
  { from: 'paused', to: 'scheduled', cause: 'project_resume', when: 'its `scheduled_at` is ahead' },
  {
    from: 'captured',
    to: 'captured',
    cause: 'project_resume',
    when: 'a sandbox message stays captured, no longer held',
  },
  { from: 'queued', to: 'sending', cause: 'lease' },
  { from: 'scheduled', to: 'sending', cause: 'lease' },
  { from: 'sending', to: 'sending', cause: 'lease_expired' },
  { from: 'sending', to: 'sending', cause: 'lease_reclaimed' },
  {
    from: 'sending',
    to: 'sent',
    cause: 'hand_off',
    when: 'a provider took it for every recipient left',
  },
  {
    from: 'sending',
    to: 'queued',
    cause: 'hand_off',
    when: 'every candidate failed for now, or a provider deferred some recipients: the retry ladder',
  },
  {
    from: 'sending',
    to: 'failed',
    cause: 'hand_off',
    when: 'refused for good, every recipient bounced, its project was deleted, or the next try would pass `max_age_seconds`',
  },
  {
    from: 'sending',
    to: 'suppressed',
    cause: 'hand_off',
    when: 'every recipient left is suppressed',
  },
  { from: 'queued', to: 'failed', cause: 'expire' },
  { from: 'scheduled', to: 'failed', cause: 'expire' },
  { from: 'paused', to: 'failed', cause: 'expire' },
  { from: 'captured', to: 'failed', cause: 'expire' },
  { from: 'sent', to: 'delivered', cause: 'provider_feedback' },
  { from: 'sent', to: 'failed', cause: 'provider_feedback' },
  { from: 'sent', to: 'bounced', cause: 'provider_feedback' },
  { from: 'sent', to: 'complained', cause: 'provider_feedback' },
  { from: 'delivered', to: 'failed', cause: 'provider_feedback' },
  { from: 'delivered', to: 'bounced', cause: 'provider_feedback' },
  { from: 'delivered', to: 'complained', cause: 'provider_feedback' },
  { from: 'failed', to: 'bounced', cause: 'provider_feedback' },
  { from: 'failed', to: 'complained', cause: 'provider_feedback' },
  { from: 'bounced', to: 'complained', cause: 'provider_feedback' },
  { from: 'queued', to: 'failed', cause: 'spool_file_missing' },
  { from: 'scheduled', to: 'failed', cause: 'spool_file_missing' },
  { from: 'paused', to: 'failed', cause: 'spool_file_missing' },
  { from: 'captured', to: 'failed', cause: 'spool_file_missing' },
  { from: 'sending', to: 'failed', cause: 'spool_file_missing' },
] as const satisfies readonly Transition[];

type TransitionRow = (typeof TRANSITIONS)[number];
export type TransitionCause = TransitionRow['cause'];
export type TargetOf<C extends TransitionCause> = Extract<TransitionRow, { cause: C }>['to'];

export const REMOVALS = [
  { cause: 'delete', from: ['captured'] },
  { cause: 'retention', from: FINISHED_STATUSES },
] as const satisfies readonly { cause: Cause; from: readonly MessageStatus[] }[];

export type RemovalCause = (typeof REMOVALS)[number]['cause'];

const fromLists = new Map<string, readonly MessageStatus[]>();

/** In MESSAGE_STATUSES order: a writer's `WHERE status IN (...)` guard. */
export function fromStatuses(cause: TransitionCause, to?: MessageStatus): readonly MessageStatus[] {
  const key = to === undefined ? cause : `${cause} ${to}`;
  let list = fromLists.get(key);
  if (!list) {
    const rows: readonly Transition[] = TRANSITIONS;
    list = MESSAGE_STATUSES.filter((s) =>
      rows.some((t) => t.cause === cause && t.from === s && (to === undefined || t.to === to)),
    );
    if (list.length === 0)
      throw new Error(`no transition by ${cause}${to === undefined ? '' : ` to ${to}`}`);
    fromLists.set(key, list);
  }
  return list;
}

export function allows(cause: Cause, from: MessageStatus, to: MessageStatus): boolean {
  const rows: readonly Transition[] = TRANSITIONS;
  return rows.some((t) => t.cause === cause && t.from === from && t.to === to);
}

export function removableFrom(cause: RemovalCause): readonly MessageStatus[] {
  const removal: { from: readonly MessageStatus[] } | undefined = REMOVALS.find(
    (r) => r.cause === cause,
  );
  return removal?.from ?? [];
}

export interface AcceptanceFacts {
  sandbox: boolean;
  /** The request's `paused`, or its project's pause. */
  held: boolean;
  scheduled: boolean;
}

export function initialStatus(facts: AcceptanceFacts): Status {
  const applies: Record<(typeof ACCEPTANCE)[number]['to'], boolean> = {
    captured: facts.sandbox,
    paused: facts.held,
    scheduled: facts.scheduled,
    queued: true,
  };
  return ACCEPTANCE.find((a) => applies[a.to])?.to ?? 'queued';
}
