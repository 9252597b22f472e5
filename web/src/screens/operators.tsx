import { useState } from 'preact/hooks';
import { type Api, api, get, post } from '../api';
import { askConfirm } from '../confirm';
import { useApp } from '../session';
import {
  checkedValues,
  ErrorNote,
  Field,
  Loading,
  ShownOnce,
  Table,
  Time,
  useAction,
  useLoad,
} from '../ui';

export function OperatorsScreen() {
  const app = useApp();
  const operators = useLoad(() => get<Api.OperatorList>('/operators'), []);
  const action = useAction();
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const name = (id: string) => app.projects.find((p) => p.id === id)?.name ?? id;
  return (
    <section>
      <h1>Operators</h1>
      {shown && <ShownOnce label={shown.label} value={shown.value} onDone={() => setShown(null)} />}
      <ErrorNote error={operators.error} />
      <ErrorNote error={action.error} />
      {!operators.data && !operators.error && <Loading what="operators" />}
      {operators.data && (
        <Table label="Operators" head={['Email', 'Role', 'Projects', 'Created']} actions>
          {operators.data.operators.map((o) => (
            <tr key={o.id}>
              <td>{o.email}</td>
              <td>{o.role}</td>
              <td class="wrap">
                {o.role === 'owner' ? 'all' : o.projects.map(name).join(', ') || '—'}
                {o.id !== app.session.operator.id && (
                  <details class="inline">
                    <summary>Change</summary>
                    <form
                      class="edit-operator"
                      onSubmit={async (e) => {
                        e.preventDefault();
                        const data = new FormData(e.currentTarget);
                        const projects = checkedValues(data, 'projects');
                        if (
                          await action.run(() =>
                            api('PATCH', `/operators/${o.id}`, {
                              role: data.get('role'),
                              projects,
                            }),
                          )
                        )
                          operators.reload();
                      }}
                    >
                      <select name="role" aria-label={`Role of ${o.email}`} defaultValue={o.role}>
                        <option value="member">member</option>
                        <option value="owner">owner</option>
                      </select>
                      {app.projects.map((p) => (
                        <label key={p.id} class="check-label">
                          <input
                            type="checkbox"
                            name="projects"
                            value={p.id}
                            defaultChecked={o.projects.includes(p.id)}
                          />{' '}
                          {p.name}
                        </label>
                      ))}
                      <button type="submit" class="small" disabled={action.busy}>
                        Save
                      </button>
                    </form>
                  </details>
                )}
              </td>
              <td>
                <Time iso={o.created_at} />
              </td>
              <td class="nowrap">
                {o.id !== app.session.operator.id && (
                  <>
                    <button
                      type="button"
                      class="small"
                      disabled={action.busy}
                      onClick={async () => {
                        if (
                          !(await askConfirm({
                            title: `Reset the password of ${o.email}?`,
                            body: (
                              <p>
                                Their sessions end and their API tokens are revoked, and they must
                                change the new (generated) password when they sign in.
                              </p>
                            ),
                            confirm: 'Reset the password',
                            danger: true,
                          }))
                        )
                          return;
                        const r = await action.run(() =>
                          post<Api.PasswordReset>(`/operators/${o.id}/reset-password`),
                        );
                        if (r)
                          setShown({ label: `New password for ${o.email}`, value: r.password });
                      }}
                    >
                      Reset password
                    </button>{' '}
                    <button
                      type="button"
                      class="small danger"
                      disabled={action.busy}
                      onClick={async () =>
                        (await askConfirm({
                          title: `Remove ${o.email}?`,
                          body: <p>Their sessions and API tokens end.</p>,
                          confirm: 'Remove the operator',
                          cancel: 'Keep them',
                          danger: true,
                        })) &&
                        (await action.run(() => api('DELETE', `/operators/${o.id}`))) &&
                        operators.reload()
                      }
                    >
                      Remove
                    </button>
                  </>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      <form
        class="card inline-form"
        onSubmit={async (e) => {
          e.preventDefault();
          const form = e.currentTarget;
          const data = new FormData(form);
          const projects = checkedValues(data, 'projects');
          const created = await action.run(() =>
            post<Api.OperatorCreated>('/operators', {
              email: String(data.get('email')).trim(),
              role: data.get('role'),
              projects,
            }),
          );
          if (created) {
            form.reset();
            if (created.password)
              setShown({
                label: `One-time password for ${created.email}`,
                value: created.password,
              });
            operators.reload();
          }
        }}
      >
        <h2>Add an operator</h2>
        <Field label="Email">
          <input name="email" type="email" required />
        </Field>
        <Field
          label="Role"
          hint="members see only the projects ticked below, and no providers, plans or operators"
        >
          <select name="role">
            <option value="member">member</option>
            <option value="owner">owner</option>
          </select>
        </Field>
        <fieldset class="events">
          <legend>Projects (members)</legend>
          {app.projects.map((p) => (
            <label key={p.id} class="check-label">
              <input type="checkbox" name="projects" value={p.id} /> {p.name}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary" disabled={action.busy}>
          Add operator
        </button>
      </form>
    </section>
  );
}
