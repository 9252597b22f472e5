import { useState } from 'preact/hooks';
import { get, query, type Api } from '../api';
import { Empty, ErrorNote, Field, formValues, Loading, Pager, Table, Time, useLoad } from '../ui';

export function AuditScreen() {
  const [filter, setFilter] = useState<{ actor?: string; action?: string }>({});
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1];
  const page = useLoad(() => get<Api.AuditPage>(`/audit${query({ ...filter, limit: 50, cursor })}`), [filter.actor, filter.action, cursor]);
  const list = page.data?.entries ?? [];
  return (
    <section>
      <h1>Audit log</h1>
      <form
        class="inline-form"
        onSubmit={(e) => {
          const v = formValues(e);
          setFilter({ actor: v.actor || undefined, action: v.action || undefined });
          setCursors([null]);
        }}
      >
        <Field label="Actor" hint="an operator id, or cli">
          <input name="actor" />
        </Field>
        <Field label="Action" hint="for example message.release">
          <input name="action" />
        </Field>
        <button type="submit">Filter</button>
      </form>
      <ErrorNote error={page.error} />
      {!page.data && !page.error && <Loading what="the audit log" />}
      {page.data && list.length === 0 && <Empty title="Nothing recorded yet." />}
      {list.length > 0 && (
        <Table label="Audit log">
          <thead>
            <tr>
              <th>When</th>
              <th>Who</th>
              <th>Action</th>
              <th>Target</th>
              <th>From</th>
              <th>Details</th>
            </tr>
          </thead>
          <tbody>
            {list.map((e) => (
              <tr key={e.seq}>
                <td class="nowrap">
                  <Time iso={e.at} />
                </td>
                <td>{e.actor_email ?? e.actor}</td>
                <td>{e.action}</td>
                <td class="wrap">{e.target ?? '—'}</td>
                <td>{e.client_ip ?? '—'}</td>
                <td class="wrap">{e.details ? JSON.stringify(e.details) : ''}</td>
              </tr>
            ))}
          </tbody>
        </Table>
      )}
      <Pager page={cursors.length - 1} hasNext={Boolean(page.data?.next_cursor)} onFirst={() => setCursors([null])} onNext={() => page.data?.next_cursor && setCursors([...cursors, page.data.next_cursor])} />
    </section>
  );
}
