/**
 * A project's webhook endpoints: add (the secret shown once), the test button, secret rotation,
 * re-enable, remove; and each endpoint's delivery log, newest first by when each attempt
 * started, where an attempt opens to show the body that was sent and the receiver's answer, and
 * a delivered or failed delivery can be sent once more (redeliver).
 */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { type Api, api, get, post, query } from '../api';
import { askConfirm } from '../confirm';
import {
  checkedValues,
  Empty,
  ErrorNote,
  Field,
  Loading,
  ShownOnce,
  Table,
  Time,
  useAction,
  useCursorPages,
  useLoad,
} from '../ui';

const EVENTS: Api.MailEventType[] = [
  'mail.accepted',
  'mail.sent',
  'mail.delivered',
  'mail.bounced',
  'mail.complained',
  'mail.failed',
  'mail.suppressed',
];

export function WebhooksScreen({ projectId }: { projectId: string }) {
  const hooks = useLoad(() => get<Api.WebhookList>(`/projects/${projectId}/webhooks`), [projectId]);
  const action = useAction();
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const list = hooks.data?.webhooks ?? [];
  return (
    <section>
      <h1>Webhooks</h1>
      {shown && <ShownOnce label={shown.label} value={shown.value} onDone={() => setShown(null)} />}
      <ErrorNote error={hooks.error} />
      {!hooks.data && !hooks.error && <Loading what="webhooks" />}
      {hooks.data && list.length === 0 && (
        <Empty title="No webhook endpoints yet.">
          <p>
            Add your endpoint's URL below to be told when mail is sent, delivered, bounced or
            complained about. Then press its Test button.
          </p>
        </Empty>
      )}
      {list.map((w) => (
        <Endpoint
          key={w.id}
          w={w}
          onChanged={hooks.reload}
          onSecret={(value) => setShown({ label: `New signing secret for ${w.url}`, value })}
        />
      ))}
      <form
        class="card inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const data = new FormData(form);
          const events = checkedValues(data, 'events');
          const created = await action.run(() =>
            post<Api.WebhookCreated>(`/projects/${projectId}/webhooks`, {
              url: String(data.get('url') ?? '').trim(),
              ...(events.length ? { events } : {}),
            }),
          );
          if (created) {
            form.reset();
            setShown({ label: `Signing secret for ${created.url}`, value: created.secret });
            hooks.reload();
          }
        }}
      >
        <h2>Add an endpoint</h2>
        <Field label="URL">
          <input name="url" type="url" required placeholder="https://example.com/hooks/postern" />
        </Field>
        <fieldset class="events">
          <legend>Events (none ticked: all)</legend>
          {EVENTS.map((ev) => (
            <label key={ev} class="check-label">
              <input type="checkbox" name="events" value={ev} /> {ev}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary" disabled={action.busy}>
          Add endpoint
        </button>
        <ErrorNote error={action.error} />
      </form>
    </section>
  );
}

function Endpoint({
  w,
  onChanged,
  onSecret,
}: {
  w: Api.Webhook;
  onChanged: () => void;
  onSecret: (s: string) => void;
}) {
  const action = useAction();
  const [test, setTest] = useState<Api.WebhookTestResult | null>(null);
  const [redelivered, setRedelivered] = useState<Api.WebhookRedelivery | null>(null);
  /** The attempt whose body and answer are open. */
  const [open, setOpen] = useState<string | null>(null);
  const pages = useCursorPages();
  const attempts = useLoad(
    () =>
      get<Api.WebhookAttemptPage>(
        `/webhooks/${w.id}/attempts${query({ limit: 20, cursor: pages.cursor })}`,
      ),
    [w.id, pages.cursor],
  );
  return (
    <article class="card webhook" data-id={w.id}>
      <h2 class="break">{w.url}</h2>
      <p>
        <span class={`badge webhook-${w.state}`}>{w.state}</span>
        {w.failing_since && (
          <span class="badge status-failed">
            failing since <Time iso={w.failing_since} />
          </span>
        )}{' '}
        <span class="muted">
          {w.id} · events {w.events ? w.events.join(', ') : 'all'} · {w.pending_deliveries} pending
          · {w.failed_deliveries} failed
          {w.previous_secret_expires_at && (
            <>
              {' '}
              · previous secret valid until <Time iso={w.previous_secret_expires_at} />
            </>
          )}
        </span>
      </p>
      {w.disabled_reason && <p class="bad">Disabled: {w.disabled_reason}</p>}
      <div class="actions">
        <button
          type="button"
          disabled={action.busy}
          onClick={async () => {
            const r = await action.run(() => post<Api.WebhookTestResult>(`/webhooks/${w.id}/test`));
            if (r) {
              setTest(r);
              pages.first();
              attempts.reload();
            }
          }}
        >
          Send test event
        </button>
        <button
          type="button"
          disabled={action.busy}
          onClick={async () => {
            if (
              !(await askConfirm({
                title: 'Rotate the signing secret?',
                body: (
                  <p>
                    A new secret is made and shown once; both secrets sign deliveries during the
                    grace period.
                  </p>
                ),
                confirm: 'Rotate the secret',
              }))
            )
              return;
            const r = await action.run(() =>
              post<Api.WebhookSecret>(`/webhooks/${w.id}/rotate-secret`),
            );
            if (r) {
              onSecret(r.secret);
              onChanged();
            }
          }}
        >
          Rotate secret
        </button>
        {w.state === 'disabled' && (
          <button
            type="button"
            disabled={action.busy}
            onClick={async () =>
              (await action.run(() => post(`/webhooks/${w.id}/enable`))) && onChanged()
            }
          >
            Re-enable
          </button>
        )}
        <button
          type="button"
          class="danger"
          disabled={action.busy}
          onClick={async () =>
            (await askConfirm({
              title: `Remove ${w.url}?`,
              body: (
                <p>It receives no more events; deliveries still waiting for it are cancelled.</p>
              ),
              confirm: 'Remove the endpoint',
              cancel: 'Keep it',
              danger: true,
            })) &&
            (await action.run(() => api('DELETE', `/webhooks/${w.id}`))) &&
            onChanged()
          }
        >
          Remove
        </button>
      </div>
      <ErrorNote error={action.error} />
      {test && (
        <p class={test.delivered ? 'note good' : 'note bad'} role="status">
          Test event {test.id}:{' '}
          {test.delivered
            ? `delivered (HTTP ${test.status_code})`
            : `not delivered (${test.status_code ? `HTTP ${test.status_code}` : (test.error ?? 'no answer')})`}{' '}
          in {test.duration_ms} ms.
        </p>
      )}
      <h3>Delivery log</h3>
      <ErrorNote error={attempts.error} />
      {attempts.data && attempts.data.attempts.length === 0 && (
        <p class="muted">No deliveries yet. Press "Send test event" to try the endpoint.</p>
      )}
      {redelivered && (
        <p class={redelivered.delivered ? 'note good' : 'note bad'} role="status">
          Redelivered {redelivered.id} (attempt {redelivered.attempt}):{' '}
          {redelivered.delivered
            ? `delivered (HTTP ${redelivered.status_code})`
            : `not delivered (${redelivered.error ?? 'no answer'})`}
          .
        </p>
      )}
      {attempts.data && attempts.data.attempts.length > 0 && (
        <Table
          label={`Delivery log of ${w.url}`}
          head={['Time', 'Event', 'Attempt', 'Result', 'Duration', 'Response']}
          actions
          bodyClass="attempts"
        >
          {attempts.data.attempts.map((a) => {
            const key = `${a.delivery_id}-${a.attempt}`;
            return (
              <Fragment key={key}>
                <tr data-delivery={a.delivery_id}>
                  <td class="nowrap">
                    <Time iso={a.attempted_at} />
                  </td>
                  <td>{a.type}</td>
                  <td>{a.attempt}</td>
                  <td class={a.delivered ? 'good' : 'bad'}>
                    {a.status_code ?? '—'} {a.delivered ? 'delivered' : 'failed'}
                  </td>
                  <td>{a.duration_ms === null ? '—' : `${a.duration_ms} ms`}</td>
                  <td class="wrap">{a.error ?? ''}</td>
                  <td class="nowrap">
                    <button
                      type="button"
                      class="small"
                      aria-expanded={open === key}
                      aria-controls={open === key ? `attempt-${key}` : undefined}
                      onClick={() => setOpen(open === key ? null : key)}
                    >
                      Details
                    </button>{' '}
                    <button
                      type="button"
                      class="small"
                      disabled={action.busy}
                      onClick={async () => {
                        setRedelivered(null);
                        const r = await action.run(() =>
                          post<Api.WebhookRedelivery>(
                            `/webhooks/${w.id}/deliveries/${a.delivery_id}/redeliver`,
                          ),
                        );
                        if (r) {
                          setRedelivered(r);
                          pages.first();
                          attempts.reload();
                          onChanged();
                        }
                      }}
                    >
                      Redeliver
                    </button>
                  </td>
                </tr>
                {open === key && (
                  <tr class="attempt-details" id={`attempt-${key}`}>
                    <td colSpan={7}>
                      <AttemptDetails webhookId={w.id} attempt={a} />
                    </td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </Table>
      )}
      {pages.pager(attempts.data?.next_cursor)}
    </article>
  );
}

/** What one attempt sent and what it got back: the delivery's body (the same bytes each attempt) and this attempt's answer. */
function AttemptDetails({
  webhookId,
  attempt,
}: {
  webhookId: string;
  attempt: Api.WebhookAttempt;
}) {
  const delivery = useLoad(
    () => get<Api.WebhookDelivery>(`/webhooks/${webhookId}/deliveries/${attempt.delivery_id}`),
    [webhookId, attempt.delivery_id],
  );
  const body = delivery.data?.request_body;
  return (
    <div class="attempt-body">
      <ErrorNote error={delivery.error} />
      <h4>Request body ({attempt.delivery_id})</h4>
      {!delivery.data ? (
        <Loading what="the request" />
      ) : body === null || body === undefined ? (
        <p class="muted">Its event is no longer kept.</p>
      ) : (
        <pre class="code request-body">{pretty(body)}</pre>
      )}
      <h4>Answer{attempt.status_code !== null ? ` (HTTP ${attempt.status_code})` : ''}</h4>
      {attempt.answer ? (
        <pre class="code answer-body">{attempt.answer}</pre>
      ) : (
        <p class="muted">
          {attempt.status_code === null
            ? `No answer: ${attempt.error ?? 'the connection failed'}.`
            : 'An empty body.'}
        </p>
      )}
    </div>
  );
}

/** JSON indented for reading (the bytes sent were compact); anything else as it is. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
