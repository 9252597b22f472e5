/**
 * The account fields a provider may take (accountFields.json): every provider's declaration
 * picks from them, and the CLI's `provider attach` flags are theirs. A field of a new kind is
 * not one folder: it goes here, in the account's settings or secrets
 * (src/contract/providerAccount.ts) and in the operator's AttachOptions.
 */
import catalogue from './accountFields.json' with { type: 'json' };

export type AccountFieldName = keyof (typeof catalogue)['fields'];

/** One account field as a slug takes it, in JSON Schema: the catalogue's type and limits, the slug's title; a secret is `writeOnly`. */
export interface AccountFieldSchema {
  type?: 'string' | 'integer';
  enum?: string[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  title: string;
  description?: string;
  writeOnly?: boolean;
}

/** The account fields a slug takes, in the order its form shows them: the JSON Schema the CLI, the console API and the web form use. */
export interface AccountSchema {
  type: 'object';
  required: AccountFieldName[];
  properties: { [K in AccountFieldName]?: AccountFieldSchema };
}

export interface AccountField {
  name: AccountFieldName;
  /** `--api-key` for `api_key`. */
  flag: string;
  /** What the usage line shows after the flag: `--host H`. */
  placeholder: string;
  /** Kept in the account's secrets: never shown again. */
  secret: boolean;
}

/** Every account field, in the catalogue's order (the CLI's usage line, the console's ProviderAttach). */
export const ACCOUNT_FIELDS: readonly AccountField[] = Object.entries(catalogue.fields).map(([name, entry]) => ({
  // The catalogue is this module's own file: its keys are exactly AccountFieldName.
  name: name as AccountFieldName,
  flag: `--${name.replace(/_/g, '-')}`,
  placeholder: entry.placeholder,
  secret: 'secret' in entry && entry.secret === true,
}));
