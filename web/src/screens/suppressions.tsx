import { useState } from 'preact/hooks';
import { API_BASE, type Api, api, get, post, query } from '../api';
import {
  Empty,
  ErrorNote,
  Field,
  formValues,
  Loading,
  Table,
  Time,
  useAction,
  useCursorPages,
  useLoad,
} from '../ui';

export function SuppressionsScreen({ projectId }: { projectId: string }) {
  const [q, setQ] = useState('');
  const pages = useCursorPages();
  const page = useLoad(
    () =>
      get<Api.SuppressionPage>(
        `/projects/${projectId}/suppressions${query({ q, limit: 50, cursor: pages.cursor })}`,
      ),
    [projectId, q, pages.cursor],
  );
  const action = useAction();
  const list = page.data?.suppressions ?? [];
  return (
    <section>
      <h1>Suppressions</h1>
      <div class="toolbar">
        {/* biome-ignore lint/a11y/useSemanticElements: the form is the search landmark (ARIA 1.2), inside a flex toolbar */}
        <form
          class="inline-form"
          role="search"
          onSubmit={(e) => {
            setQ(formValues(e).q ?? '');
            pages.first();
          }}
        >
          <Field label="Search">
            <input name="q" type="search" placeholder="address or part of it" />
          </Field>
          <button type="submit">Search</button>
        </form>
        <a class="button" href={`${API_BASE}/projects/${projectId}/suppressions.csv`} download>
          Export CSV
        </a>
      </div>
      <form
        class="inline-form"
        onSubmit={async (e) => {
          const v = formValues(e);
          const form = e.currentTarget;
          if (
            await action.run(() =>
              post(`/projects/${projectId}/suppressions`, {
                email: v.email,
                ...(v.reason ? { reason: v.reason } : {}),
              }),
            )
          ) {
            form.reset();
            page.reload();
          }
        }}
      >
        <Field label="Suppress an address">
          <input name="email" type="email" required />
        </Field>
        <Field label="Reason (optional)">
          <input name="reason" />
        </Field>
        <button type="submit" class="primary" disabled={action.busy}>
          Add
        </button>
      </form>
      <ErrorNote error={action.error} />
      <ErrorNote error={page.error} />
      {!page.data && !page.error && <Loading what="suppressions" />}
      {page.data && list.length === 0 && (
        <Empty title={q ? 'No suppressed address matches.' : 'No suppressed addresses.'}>
          <p>
            Addresses land here after a hard bounce or a complaint, or when you add one; mail to
            them is not sent.
          </p>
        </Empty>
      )}
      {list.length > 0 && (
        <Table label="Suppressed addresses" head={['Address', 'Reason', 'Since']} actions>
          {list.map((s) => (
            <tr key={s.email}>
              <td>{s.email}</td>
              <td>{s.reason}</td>
              <td>
                <Time iso={s.created_at} />
              </td>
              <td>
                <button
                  type="button"
                  class="small"
                  disabled={action.busy}
                  onClick={async () =>
                    (await action.run(() =>
                      api(
                        'DELETE',
                        `/projects/${projectId}/suppressions/${encodeURIComponent(s.email)}`,
                      ),
                    )) && page.reload()
                  }
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {pages.pager(page.data?.next_cursor)}
    </section>
  );
}
