/**
 * The direction of src/ (docs/architecture.md, "Layers"): every import points down the list
 * below, or stays within its own layer; nothing imports in a circle. `npm run lint:deps` checks
 * it, and `npm test` runs it after the build.
 */

/** Top to bottom. A layer may import its own and any layer below it. */
const layers = [
  { name: 'wiring', paths: ['^src/main\\.ts$', '^src/node/', '^src/cli/'] },
  { name: 'console', paths: ['^src/console/'] },
  { name: 'doors', paths: ['^src/(http|smtp|viewer)/'] },
  { name: 'operator', paths: ['^src/operator/'] },
  { name: 'accept', paths: ['^src/accept/'] },
  { name: 'delivery', paths: ['^src/delivery/'] },
  { name: 'events', paths: ['^src/events/'] },
  { name: 'engine', paths: ['^src/engine/'] },
  { name: 'housekeeping', paths: ['^src/housekeeping/'] },
  { name: 'commit', paths: ['^src/commit/'] },
  { name: 'policy', paths: ['^src/policy/'] },
  { name: 'domains', paths: ['^src/domains/'] },
  { name: 'providers', paths: ['^src/providers/'] },
  { name: 'dkim and mime', paths: ['^src/(dkim|mime)/'] },
  { name: 'tls', paths: ['^src/tls/'] },
  { name: 'store', paths: ['^src/store/'] },
  { name: 'spool', paths: ['^src/spool/'] },
  { name: 'ground', paths: ['^src/(contract|config|platform|types)/', '^src/(clock|ids|log)\\.ts$'] },
];

/** What the two leaves may import besides themselves: the ground floor. */
const ground = layers[layers.length - 1].paths;

const either = (paths) => (paths.length === 1 ? paths[0] : `(${paths.join('|')})`);

const downward = layers.slice(1).map((layer, i) => ({
  name: 'points-down',
  severity: 'error',
  comment: `${layer.name} imports a layer above it (see docs/architecture.md, "Layers")`,
  from: { path: either(layer.paths) },
  to: { path: either(layers.slice(0, i + 1).flatMap((l) => l.paths)) },
}));

/** A leaf folder: it imports itself and the ground floor (config, contract, clock, ids, log, platform) only. */
function leaf(folder, holds) {
  return {
    name: `${folder}-is-a-leaf`,
    severity: 'error',
    comment: `${folder}/ holds ${holds}: it imports only the ground floor (config, contract, clock, ids, log, platform).`,
    from: { path: `^src/${folder}/` },
    to: { path: '^src/', pathNot: [`^src/${folder}/`, ...ground] },
  };
}

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules that import each other in a circle: neither is below the other.',
      from: {},
      to: { circular: true },
    },
    ...downward,
    leaf('store', 'tables and queries'),
    leaf('spool', 'files (write, publish, read, recycle)'),
    leaf('engine', 'the leased-work engine, which knows nothing of what its handlers lease'),
    {
      name: 'doors-use-the-pipeline',
      severity: 'error',
      comment: 'The doors (http, smtp, the public viewer) speak their protocol and call the layers below; they never reach the store or the spool.',
      from: { path: '^src/(http|smtp|viewer)/' },
      to: { path: '^src/(store|spool)/' },
    },
    {
      name: 'console-uses-the-operator-layer',
      severity: 'error',
      comment: 'The console door speaks HTTP and calls the operator layer (the same rules as the CLI); it never reaches the store, the spool or the commit layer.',
      from: { path: '^src/console/' },
      to: { path: '^src/(store|spool|commit)/' },
    },
    {
      name: 'a-provider-is-one-folder',
      severity: 'error',
      comment: "A provider's folder (src/providers/<folder>/) imports the shared provider modules and the ground floor, never another provider's folder (docs/architecture.md, \"Providers\").",
      from: { path: '^src/providers/([^/]+)/' },
      to: { path: '^src/providers/[^/]+/', pathNot: '^src/providers/$1/' },
    },
    {
      name: 'only-the-registry-names-providers',
      severity: 'error',
      comment: 'Only registry.gen.ts (generated from the folders) imports a provider folder: everything else asks the registry, so adding a provider is adding its folder.',
      from: { pathNot: '^src/providers/([^/]+/|registry\\.gen\\.ts$)' },
      to: { path: '^src/providers/[^/]+/' },
    },
    {
      name: 'only-the-store-knows-its-backend',
      severity: 'error',
      comment:
        "Nothing outside src/store imports store/postgres/: the store's seams (store/backend.ts, backendOf) answer for the backend chosen when it was opened (store/open.ts). scripts/check-store-seams.mjs keeps `dialect` inside src/store too.",
      from: {
        path: '^src/',
        pathNot: ['^src/store/'],
      },
      to: { path: '^src/store/postgres/' },
    },
    {
      name: 'providers-never-store',
      severity: 'error',
      comment: 'Providers get a parsed account and a message, never the store.',
      from: { path: '^src/providers/' },
      to: { path: '^src/store/' },
    },
  ],
  options: {
    includeOnly: '^src/',
    // Type-only imports count: a type ties the importer to its module's layer as much as a value.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
