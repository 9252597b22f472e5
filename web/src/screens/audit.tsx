/** The audit log (owners): newest first, filtered by the operator's email and by action. */
import { useState } from 'preact/hooks';
import { type Api, get, query } from '../api';
import {
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  Table,
  Time,
  useCursorPages,
  useLoad,
} from '../ui';

export function AuditScreen() {
  const [filter, setFilter] = useState<{ actor_email?: string; actor?: string; action?: string }>(
    {},
  );
  const pages = useCursorPages();
  const page = useLoad(
    () => get<Api.AuditPage>(`/audit${query({ ...filter, limit: 50, cursor: pages.cursor })}`),
    [filter.actor_email, filter.actor, filter.action, pages.cursor],
  );
  const operators = useLoad(() => get<Api.OperatorList>('/operators'), []);
  const list = page.data?.entries ?? [];
  return (
    <section>
      <h1>Audit log</h1>
      <form
        class="inline-form"
        onSubmit={(e) => {
          const v = formValues(e);
          // "cli" is the actor of the commands run on the server; anything else is an operator's email.
          const who = v.who || undefined;
          setFilter({
            ...(who?.toLowerCase() === 'cli' ? { actor: 'cli' } : { actor_email: who }),
            action: v.action || undefined,
          });
          pages.first();
        }}
      >
        <Field label="Operator" hint="their email, or cli for commands on the server">
          <input name="who" type="text" list="audit-operators" autoComplete="off" />
        </Field>
        <datalist id="audit-operators">
          <option value="cli" />
          {operators.data?.operators.map((o) => (
            <option key={o.id} value={o.email} />
          ))}
        </datalist>
        <Field label="Action" hint="for example message.release">
          <input name="action" />
        </Field>
        <button type="submit">Filter</button>
      </form>
      <ErrorNote error={page.error} />
      {!page.data && !page.error && <Loading what="the audit log" />}
      {page.data && list.length === 0 && (
        <Empty
          title={
            filter.actor_email || filter.actor || filter.action
              ? 'Nothing recorded matches this filter.'
              : 'Nothing recorded yet.'
          }
        />
      )}
      {list.length > 0 && (
        <Table label="Audit log" head={['When', 'Who', 'Action', 'Target', 'From', 'Details']}>
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
        </Table>
      )}
      {pages.pager(page.data?.next_cursor)}
    </section>
  );
}
