/**
 * Your own account: who you are, and changing your password (every operator). The same form is
 * the whole screen after signing in with a generated password (`operator create`, a reset),
 * which must be changed before anything else.
 */
import { useState } from 'preact/hooks';
import { type Api, api } from '../api';
import { useApp } from '../session';
import { ErrorNote, Field, Time, useAction, usePageTitle } from '../ui';

function PasswordForm({
  email,
  oneTime,
  onChanged,
}: {
  email: string;
  oneTime: boolean;
  onChanged: () => void;
}) {
  const action = useAction();
  const [mismatch, setMismatch] = useState(false);
  return (
    <form
      class="password-form"
      onSubmit={async (e) => {
        e.preventDefault();
        const form = e.currentTarget;
        const data = new FormData(form);
        const current = String(data.get('current_password') ?? '');
        const next = String(data.get('new_password') ?? '');
        if (next !== String(data.get('repeat_password') ?? '')) return setMismatch(true);
        setMismatch(false);
        if (
          (await action.run(() =>
            api('PUT', '/session/password', { current_password: current, new_password: next }).then(
              () => true,
            ),
          )) === true
        ) {
          form.reset();
          onChanged();
        }
      }}
    >
      {/* Whose password it is, for password managers (not shown). */}
      <input
        class="visually-hidden"
        type="email"
        name="username"
        autoComplete="username"
        value={email}
        readOnly
        tabIndex={-1}
        aria-hidden="true"
      />
      <Field label={oneTime ? 'One-time password' : 'Current password'}>
        <input name="current_password" type="password" autoComplete="current-password" required />
      </Field>
      <Field label="New password" hint="at least 12 characters">
        <input
          name="new_password"
          type="password"
          autoComplete="new-password"
          required
          minLength={12}
          maxLength={256}
        />
      </Field>
      <Field label="New password again">
        <input name="repeat_password" type="password" autoComplete="new-password" required />
      </Field>
      {mismatch && (
        <p class="error" role="alert">
          The two new passwords differ.
        </p>
      )}
      <ErrorNote error={action.error} />
      <button type="submit" class="primary" disabled={action.busy}>
        Change password
      </button>
    </form>
  );
}

/** The whole screen until a generated password is changed: nothing else is allowed before. */
export function ForcedPasswordChange({
  session,
  onChanged,
  onSignOut,
}: {
  session: Api.Session;
  onChanged: () => void;
  onSignOut: () => void;
}) {
  usePageTitle('Choose your password');
  return (
    <main class="sign-in">
      <h1>Choose your password</h1>
      <p>
        The password you signed in with as <strong>{session.operator.email}</strong> was generated
        for you, and whoever made your account has seen it. Choose your own to use the console.
      </p>
      <PasswordForm email={session.operator.email} oneTime onChanged={onChanged} />
      <p class="small-print">
        <button type="button" class="link" onClick={onSignOut}>
          Sign out
        </button>
      </p>
    </main>
  );
}

export function AccountScreen() {
  const app = useApp();
  const [changed, setChanged] = useState(false);
  const me = app.session.operator;
  return (
    <section>
      <h1>Your account</h1>
      <dl class="facts">
        <dt>Email</dt>
        <dd>{me.email}</dd>
        <dt>Role</dt>
        <dd>{me.role}</dd>
        <dt>Password changed</dt>
        <dd>
          <Time iso={me.password_changed_at} />
        </dd>
      </dl>
      <div class="card">
        <h2>Change password</h2>
        {changed && (
          <p class="note" role="status">
            Your password is changed. Your other sessions are signed out; this one stays.
          </p>
        )}
        <PasswordForm
          email={me.email}
          oneTime={false}
          onChanged={() => {
            setChanged(true);
            app.refreshSession();
          }}
        />
      </div>
    </section>
  );
}
