/** The account fields a provider may take (accountFields.json); a new kind of field also goes in providerAccount.ts and AttachOptions. */
import catalogue from './accountFields.json' with { type: 'json' };

export type AccountFieldName = keyof (typeof catalogue)['fields'];

/** A secret is `writeOnly`. */
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

/** In form order: the JSON Schema the CLI, the console API and the web form use. */
export interface AccountSchema {
  type: 'object';
  required: AccountFieldName[];
  properties: { [K in AccountFieldName]?: AccountFieldSchema };
}

export interface AccountField {
  name: AccountFieldName;
  flag: string;
  placeholder: string;
  /** Never shown again. */
  secret: boolean;
}

export const ACCOUNT_FIELDS: readonly AccountField[] = Object.entries(catalogue.fields).map(
  ([name, entry]) => ({
    // The catalogue is this module's own file: its keys are exactly AccountFieldName.
    name: name as AccountFieldName,
    flag: `--${name.replace(/_/g, '-')}`,
    placeholder: entry.placeholder,
    secret: 'secret' in entry && entry.secret === true,
  }),
);
