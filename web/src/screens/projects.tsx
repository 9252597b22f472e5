/**
 * Projects: each one's plan (chosen from the configured plans), usage against its limits (bytes
 * in human units), pause / resume and its default strategy (owners).
 */
import { useState } from 'preact/hooks';
import { type Api, api, get, post } from '../api';
import { askConfirm } from '../confirm';
import { href } from '../router';
import { isOwner, useApp } from '../session';
import {
  bytes,
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  UsageBar,
  useAction,
  useLoad,
} from '../ui';

const STRATEGIES: Api.Strategy[] = ['fallback', 'round-robin', 'random', 'free-first'];

export function ProjectsScreen() {
  const app = useApp();
  const owner = isOwner(app);
  const create = useAction();
  const plans = useLoad(() => get<Api.PlanList>('/plans'), []);
  return (
    <section>
      <h1>Projects</h1>
      {app.projects.length === 0 && (
        <Empty title="No projects yet.">
          <p>
            {owner
              ? 'Create one below, then give it an API key.'
              : 'An owner has not given you a project yet.'}
          </p>
        </Empty>
      )}
      <div class="cards">
        {app.projects.map((p) => (
          <ProjectCard
            key={p.id}
            id={p.id}
            owner={owner}
            plans={plans.data?.plans ?? []}
            onChanged={app.reloadProjects}
          />
        ))}
      </div>
      {owner && (
        <form
          class="card inline-form"
          onSubmit={async (e) => {
            const v = formValues(e);
            const form = e.currentTarget;
            if (
              await create.run(() =>
                post('/projects', { name: v.name, ...(v.plan ? { plan: v.plan } : {}) }),
              )
            ) {
              form.reset();
              app.reloadProjects();
            }
          }}
        >
          <h2>New project</h2>
          <Field label="Name">
            <input name="name" required maxLength={200} />
          </Field>
          <Field label="Plan">
            <select name="plan">
              {(plans.data?.plans ?? []).map((pl) => (
                <option key={pl.name} value={pl.name} selected={pl.default}>
                  {planLabel(pl)}
                </option>
              ))}
            </select>
          </Field>
          <button type="submit" class="primary" disabled={create.busy}>
            Create project
          </button>
          <ErrorNote error={create.error} />
        </form>
      )}
    </section>
  );
}

/** A plan as the choice names it: "pro — 50,000 messages / month, 50 GB". */
function planLabel(p: Api.Plan): string {
  return `${p.name} — ${p.limits.monthly_messages.toLocaleString()} messages / month, ${bytes(p.limits.monthly_bytes)}${p.default ? ' (default)' : ''}`;
}

function ProjectCard({
  id,
  owner,
  plans,
  onChanged,
}: {
  id: string;
  owner: boolean;
  plans: Api.Plan[];
  onChanged: () => void;
}) {
  const project = useLoad(() => get<Api.ProjectDetail>(`/projects/${id}`), [id]);
  const action = useAction();
  const [strategy, setStrategy] = useState<string | null>(null);
  const [plan, setPlan] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const p = project.data;
  if (project.error) return <ErrorNote error={project.error} />;
  if (!p) return <Loading what="project" />;
  const change = async <T,>(fn: () => Promise<T>): Promise<T | undefined> => {
    setDone(null);
    const result = await action.run(fn);
    if (result) {
      project.reload();
      onChanged();
    }
    return result;
  };
  const pause = async () => {
    const ok = await askConfirm({
      title: `Pause ${p.name}?`,
      body: (
        <p>
          Mail it accepts from now on is held (status <em>paused</em>) and not sent until you resume
          it; sandbox mail is held with it. Mail already queued still goes.
        </p>
      ),
      confirm: `Pause ${p.name}`,
      cancel: 'Keep it sending',
    });
    if (ok && (await change(() => post(`/projects/${p.id}/pause`))))
      setDone(`${p.name} is paused: new mail is held until you resume it.`);
  };
  const resume = async () => {
    const ok = await askConfirm({
      title: `Resume ${p.name}?`,
      body: (
        <p>
          The mail held by the pause is released at once and delivered to its recipients (held
          sandbox mail stays captured).
        </p>
      ),
      confirm: `Resume and send the held mail`,
      cancel: 'Keep it paused',
    });
    if (!ok) return;
    const result = await change(() => post<Api.ProjectPauseResult>(`/projects/${p.id}/resume`));
    if (result)
      setDone(
        `${p.name} is sending again: ${(result.released ?? 0).toLocaleString()} held message${result.released === 1 ? '' : 's'} released.`,
      );
  };
  return (
    <article class="card project">
      <h2>
        {p.name} {p.paused && <span class="badge status-paused">paused</span>}
      </h2>
      <p class="muted">
        {p.id} · plan <strong>{p.plan}</strong> · strategy {p.strategy}
      </p>
      <UsageBar
        label={`Messages this month (${p.usage.month.period})`}
        used={p.usage.month.messages}
        limit={p.limits.monthly_messages}
      />
      <UsageBar
        label={`Messages today (${p.usage.day.period})`}
        used={p.usage.day.messages}
        limit={p.limits.daily_messages}
      />
      <UsageBar
        label="Volume this month"
        used={p.usage.month.bytes}
        limit={p.limits.monthly_bytes}
        format={bytes}
      />
      <UsageBar
        label="Sender domains"
        used={p.usage.sender_domains.length}
        limit={p.limits.sender_domains}
      />
      <p class="links">
        <a href={href(`/projects/${p.id}/inbox`)}>Sandbox inbox</a> ·{' '}
        <a href={href(`/projects/${p.id}/keys`)}>API keys</a> ·{' '}
        <a href={href(`/projects/${p.id}/webhooks`)}>Webhooks</a>
      </p>
      {owner && (
        <div class="actions">
          <button
            type="button"
            disabled={action.busy}
            onClick={() => (p.paused ? resume() : pause())}
          >
            {p.paused ? 'Resume' : 'Pause'}
          </button>
          <label>
            <span class="visually-hidden">Strategy</span>
            <select
              aria-label="Strategy"
              value={strategy ?? p.strategy}
              onChange={(e) => setStrategy(e.currentTarget.value)}
            >
              {STRATEGIES.map((s) => (
                <option key={s}>{s}</option>
              ))}
            </select>
          </label>
          <button
            type="button"
            disabled={action.busy || !strategy || strategy === p.strategy}
            onClick={() => change(() => api('PUT', `/projects/${p.id}/strategy`, { strategy }))}
          >
            Set strategy
          </button>
          <label>
            <span class="visually-hidden">Plan of {p.name}</span>
            <select
              aria-label={`Plan of ${p.name}`}
              value={plan ?? p.plan}
              onChange={(e) => setPlan(e.currentTarget.value)}
            >
              {plans.map((pl) => (
                <option key={pl.name} value={pl.name}>
                  {planLabel(pl)}
                </option>
              ))}
            </select>
          </label>
          <button
            type="button"
            disabled={action.busy || !plan || plan === p.plan}
            onClick={async () => {
              if (await change(() => api('PUT', `/projects/${p.id}/plan`, { plan })))
                setDone(
                  `${p.name} is on the ${plan} plan now: its limits apply from the next message.`,
                );
            }}
          >
            Change plan
          </button>
        </div>
      )}
      <ErrorNote error={action.error} />
      {done && (
        <p class="note" role="status">
          {done}
        </p>
      )}
    </article>
  );
}
