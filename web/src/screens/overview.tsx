import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { type Api, get } from '../api';
import { href } from '../router';
import { Ago, bytes, Empty, ErrorNote, Loading, Table, Time, useLoad } from '../ui';

/** The chart's series, in the order of a message's life; the colours hold in light and dark. */
const SERIES: {
  key: keyof Api.Overview['hourly'][number]['counts'];
  label: string;
  color: string;
  hint: string;
}[] = [
  {
    key: 'accepted',
    label: 'Accepted',
    color: '#6b7c93',
    hint: 'taken in by the HTTP API or SMTP',
  },
  { key: 'sent', label: 'Sent', color: '#2f6fdb', hint: 'handed to a provider' },
  {
    key: 'delivered',
    label: 'Delivered',
    color: '#1f8a4c',
    hint: 'the provider reported delivery',
  },
  {
    key: 'deferred',
    label: 'Deferred',
    color: '#c9a100',
    hint: 'hand-offs that failed for now: the message is retried',
  },
  { key: 'bounced', label: 'Bounced', color: '#d4862a', hint: 'refused by the receiving server' },
  { key: 'complained', label: 'Complained', color: '#9b3fc4', hint: 'marked as spam' },
  { key: 'failed', label: 'Failed', color: '#c93c3c', hint: 'given up on for good' },
];

const HOUR_S = 3600;

/** Grouped bars: each series its own bar in each hour, side by side (a line between two hours would show counts no hour had). */
function barsOf(index: number, count: number): uPlot.Series.PathBuilder {
  const slot = (HOUR_S * 0.84) / count;
  return uPlot.paths.bars!({
    disp: {
      x0: {
        unit: 1,
        values: (u) => (u.data[0] as number[]).map((t) => t - HOUR_S * 0.42 + index * slot),
      },
      size: { unit: 1, values: () => [slot * 0.9] },
    },
  });
}

function HourlyChart({ hourly }: { hourly: Api.Overview['hourly'] }) {
  const box = useRef<HTMLDivElement>(null);
  const shown = SERIES.filter(
    (s) => s.key !== 'complained' || hourly.some((h) => h.counts.complained > 0),
  );
  useEffect(() => {
    const el = box.current!;
    const data: uPlot.AlignedData = [
      hourly.map((h) => Date.parse(h.hour) / 1000 + HOUR_S / 2),
      ...shown.map((s) => hourly.map((h) => h.counts[s.key])),
    ];
    const ink = getComputedStyle(el).color;
    const grid = getComputedStyle(el).getPropertyValue('--line').trim() || '#d8dce1';
    const axis = {
      stroke: ink,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 },
    };
    const size = () => ({ width: Math.max(280, el.clientWidth), height: 240 });
    const first = data[0][0] as number;
    const last = data[0][data[0].length - 1] as number;
    const chart = new uPlot(
      {
        ...size(),
        legend: { show: false },
        cursor: { show: false },
        series: [
          {},
          ...shown.map((s, i) => ({
            label: s.label,
            stroke: s.color,
            fill: s.color,
            width: 0,
            points: { show: false },
            paths: barsOf(i, shown.length),
          })),
        ],
        axes: [axis, { ...axis, size: 50 }],
        scales: {
          x: { time: true, range: () => [first - HOUR_S / 2, last + HOUR_S / 2] },
          y: { range: (_u, _min, max) => [0, Math.max(5, max)] },
        },
      },
      data,
      el,
    );
    const resize = new ResizeObserver(() => chart.setSize(size()));
    resize.observe(el);
    return () => {
      resize.disconnect();
      chart.destroy();
    };
  }, [hourly]);
  const totals = Object.fromEntries(
    SERIES.map((s) => [s.key, hourly.reduce((n, h) => n + h.counts[s.key], 0)]),
  );
  return (
    <>
      <ul class="legend" aria-label="Totals over the last 24 hours">
        {SERIES.map((s) => (
          <li key={s.key} title={s.hint}>
            <span class="swatch" style={{ background: s.color }} aria-hidden="true" /> {s.label}{' '}
            <strong>{totals[s.key].toLocaleString()}</strong>
          </li>
        ))}
      </ul>
      <div
        ref={box}
        class="chart"
        role="img"
        aria-label={`Messages per hour over the last 24 hours, by outcome: ${SERIES.map((s) => `${s.label.toLowerCase()} ${totals[s.key]}`).join(', ')}`}
      />
      <details class="chart-table">
        <summary>The figures per hour</summary>
        <Table label="Messages per hour" head={['Hour', ...SERIES.map((s) => s.label)]}>
          {hourly
            .filter((h) => SERIES.some((s) => h.counts[s.key] > 0))
            .map((h) => (
              <tr key={h.hour}>
                <td class="nowrap">
                  <Time iso={h.hour} />
                </td>
                {SERIES.map((s) => (
                  <td key={s.key}>{h.counts[s.key].toLocaleString()}</td>
                ))}
              </tr>
            ))}
        </Table>
      </details>
    </>
  );
}

/** The Postern processes serving this index (GET /nodes): up, missing (no beat for 3 heartbeats) or stopped. */
function NodesPanel({ asOf }: { asOf: string }) {
  // Read again whenever the overview is (its Refresh), so "last beat" stays current.
  const nodes = useLoad(() => get<Api.NodeList>('/nodes'), [asOf]);
  return (
    <div class="card">
      <h2>Nodes</h2>
      <ErrorNote error={nodes.error} />
      {nodes.data &&
        (nodes.data.nodes.length === 0 ? (
          <p class="muted">No node has registered yet.</p>
        ) : (
          <Table label="Nodes" head={['Node', 'Version', 'State', 'Last beat', 'Listeners']}>
            {nodes.data.nodes.map((n) => (
              <tr key={n.id}>
                <td>
                  {n.id}{' '}
                  <span class="muted">
                    {n.hostname} pid {n.pid}
                  </span>
                </td>
                <td>{n.version}</td>
                <td>
                  <span class={`badge node-${n.state}`}>{n.state}</span>
                </td>
                <td>
                  <Ago iso={n.last_beat_at} />
                </td>
                <td class="wrap">
                  {n.listeners.map((l) => `${l.name} ${l.host}:${l.port}`).join(', ')}
                </td>
              </tr>
            ))}
          </Table>
        ))}
    </div>
  );
}

export function OverviewScreen() {
  const overview = useLoad(() => get<Api.Overview>('/overview'), []);
  const o = overview.data;
  return (
    <section>
      <h1>Overview</h1>
      <ErrorNote error={overview.error} />
      {!o && !overview.error && <Loading what="the overview" />}
      {o && (
        <>
          <div class="card">
            <h2>Last 24 hours</h2>
            <HourlyChart hourly={o.hourly} />
          </div>
          <div class="tiles">
            {(Object.keys(o.queue) as (keyof typeof o.queue)[]).map((k) => (
              <a
                key={k}
                class="tile"
                href={href('/messages', { status: k === 'sending' ? 'sending' : k })}
              >
                <span class="tile-value">{o.queue[k].toLocaleString()}</span>
                <span class="tile-label">{k}</span>
              </a>
            ))}
          </div>
          <div class="grid2">
            <div class="card">
              <h2>Oldest waiting message</h2>
              {o.oldest_waiting ? (
                <p>
                  <a href={href(`/messages/${o.oldest_waiting.id}`)}>{o.oldest_waiting.id}</a> —
                  waiting {Math.round(o.oldest_waiting.age_seconds / 60)} min,{' '}
                  {o.oldest_waiting.attempts} attempts, next{' '}
                  <Time iso={o.oldest_waiting.next_attempt_at} />
                </p>
              ) : (
                <p class="muted">Nothing is waiting.</p>
              )}
            </div>
            <div class="card">
              <h2>Storage</h2>
              {o.storage ? (
                <p>
                  Spool {bytes(o.storage.spool_bytes)}
                  {o.storage.disk_free_bytes !== null &&
                    o.storage.disk_total_bytes !== null &&
                    `; disk ${bytes(o.storage.disk_free_bytes)} free of ${bytes(o.storage.disk_total_bytes)}`}
                </p>
              ) : (
                <p class="muted">Owners see the spool and disk figures.</p>
              )}
            </div>
          </div>
          {o.providers && (
            <div class="card">
              <h2>Providers (last hour)</h2>
              {o.providers.length === 0 ? (
                <Empty title="No provider accounts yet.">
                  <p>Attach one under a project's Providers page so production mail can leave.</p>
                </Empty>
              ) : (
                <Table
                  label="Provider health"
                  head={[
                    'Account',
                    'Hand-offs',
                    'Failed hand-offs',
                    'Throttled until',
                    'Last error',
                  ]}
                >
                  {o.providers.map((p) => (
                    <tr key={p.id}>
                      <td>
                        {p.slug} <span class="muted">{p.id}</span>
                      </td>
                      <td>{p.handoffs_last_hour}</td>
                      <td class={p.failures_last_hour ? 'bad' : ''}>{p.failures_last_hour}</td>
                      <td>
                        <Time iso={p.throttled_until} />
                      </td>
                      <td class="wrap">{p.last_error ?? '—'}</td>
                    </tr>
                  ))}
                </Table>
              )}
            </div>
          )}
          <NodesPanel asOf={o.generated_at} />
          <div class="card">
            <h2>Webhook endpoints needing attention</h2>
            {o.webhooks.length === 0 ? (
              <p class="muted">Every endpoint is delivering.</p>
            ) : (
              <ul>
                {o.webhooks.map((w) => (
                  <li key={w.id}>
                    <a href={href(`/projects/${w.project_id}/webhooks`)}>{w.url}</a> — {w.state}
                    {w.disabled_reason ? `: ${w.disabled_reason}` : ''} (since{' '}
                    <Time iso={w.disabled_at ?? w.failing_since} />)
                  </li>
                ))}
              </ul>
            )}
          </div>
          <p class="muted">
            Figures as of <Time iso={o.generated_at} />.{' '}
            <button type="button" class="link" onClick={overview.reload}>
              Refresh
            </button>
          </p>
        </>
      )}
    </section>
  );
}
