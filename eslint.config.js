import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * One `no-restricted-imports` rule per folder of the console: the entry (main.js) is imported by nobody, a
 * folder never imports one `above` it, and a panel no other panel (`siblings`).
 */
function consoleLayers(layers) {
  return Object.entries(layers).map(([folder, { above, siblings, noDom }]) => ({
    files: [`services/gateway/console/${folder}`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/main.js'], message: 'main.js wires the page: nothing imports it.' },
            ...above.map((name) => ({
              group: [`../${name}/*`, `../../${name}/*`],
              message: `${folder.split('/')[0]}/ is below ${name}/: imports go one way (main.js says which).`,
            })),
            ...(siblings
              ? [
                  {
                    group: ['./*', '../panels/*'],
                    message: 'A panel imports no other panel: they meet in the store.',
                  },
                ]
              : []),
          ],
        },
      ],
      ...(noDom
        ? {
            'no-restricted-globals': [
              'error',
              ...['document', 'window', 'Element', 'HTMLElement'].map((name) => ({
                name,
                message: 'lib/ has no DOM: the page reaches it through ui/ and store/.',
              })),
            ],
          }
        : {}),
    },
  }));
}

/**
 * Each service's source in layers, lowest first (docs/architecture.md, "The direction of imports"): a layer
 * imports only the layers below it, and the folders of one layer never import each other. An entry is a folder
 * (`name/`), a file at the service's src root (`name.ts`), or `*.ts`: the root files no other layer names. Root
 * files of one layer may import each other. `npx eslint` fails on an import that breaks this
 * (tests/layout.test.ts proves it).
 */
export const layers = {
  'services/playground/src': [
    ['egress/', 'recording/'],
    ['models/'],
    ['observability/'],
    ['conversation/', 'sessions/'],
    ['voice/'],
    ['transports/'],
    ['testing/', 'live/'],
    ['analysis/'],
    ['config.ts', 'service.ts'],
    ['threads/'],
    ['index.ts', 'main.ts'],
  ],
  'services/sessions/src': [
    ['stats/'],
    ['*.ts'],
    ['testing/'],
    ['live/'],
    ['analysis/'],
    ['deps.ts'],
    ['handlers/'],
    ['service.ts', 'main.ts', 'index.ts'],
  ],
  'services/agents/src': [['*.ts'], ['handlers/'], ['service.ts', 'main.ts', 'index.ts']],
  'services/gateway/src': [['*.ts'], ['app.ts'], ['main.ts', 'index.ts']],
  'services/telephony/src': [
    ['audio/', 'twilio/'],
    ['numbers/'],
    ['calls/'],
    ['handlers/'],
    ['http/'],
    ['config.ts', 'service.ts', 'index.ts', 'main.ts'],
  ],
  'services/webhooks/src': [['*.ts'], ['delivery/'], ['handlers/'], ['service.ts', 'main.ts', 'index.ts']],
};

/**
 * The workspace packages in layers, lowest first: a package imports only packages of the layers below it, none
 * of its own layer (a service never imports another service). `@vab/testkit` is for tests only (any
 * `*.test.ts`, a package's `test/`, `tests/`, `bench/`); `@vab/client` is the API's client for front ends, no
 * package's dependency.
 */
export const packageLayers = [
  ['contracts'],
  ['bus', 'storage', 'flow', 'egress'],
  ['service-kit'],
  ['agents', 'sessions', 'gateway', 'playground', 'telephony', 'webhooks'],
];
/** The packages outside the layers, and what each may import: the tests' kit and the front ends' client. */
const PACKAGES_ASIDE = { testkit: ['contracts'], client: [] };
const PACKAGE_DIRS = {
  contracts: 'packages/contracts',
  bus: 'packages/bus',
  storage: 'packages/storage',
  flow: 'packages/flow',
  egress: 'packages/egress',
  'service-kit': 'packages/service-kit',
  testkit: 'packages/testkit',
  client: 'packages/client',
  agents: 'services/agents',
  sessions: 'services/sessions',
  gateway: 'services/gateway',
  playground: 'services/playground',
  telephony: 'services/telephony',
  webhooks: 'services/webhooks',
};

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const nameOf = (e) => (e === '*.ts' ? 'the root files' : e.replace(/\/$|\.ts$/, ''));
const DIRECTION = '(docs/architecture.md, "The direction of imports")';

/** What an entry of a service's layers must not import, as a pattern on a specifier that starts at `prefix`. */
function forbiddenPattern(prefix, forbidden) {
  const target = (e) =>
    e.endsWith('/') ? escape(e) : e === '*.ts' ? '[^/]+\\.js$' : `${escape(e.replace(/\.ts$/, '.js'))}$`;
  return `^${prefix}(?:${forbidden.map(target).join('|')})`;
}

/** One `no-restricted-imports` config per entry of a service's layers (and per folder depth). */
function layerRules(root, serviceLayers) {
  const named = serviceLayers.flat().filter((e) => e.endsWith('.ts') && e !== '*.ts');
  const configs = [];
  serviceLayers.forEach((layer, i) => {
    const below = serviceLayers.slice(0, i);
    for (const entry of layer) {
      // every entry of its own layer and above (the root files of its own layer excepted, when it is one);
      // nothing for the top layer's root files
      const forbidden = serviceLayers
        .slice(i)
        .flat()
        .filter((e) => e !== entry && !(e.endsWith('.ts') && entry.endsWith('.ts') && layer.includes(e)));
      // `*.ts` above it stands for every root file: none may then lie below, or it would be forbidden too
      if (forbidden.length === 0) continue;
      if (forbidden.includes('*.ts') && below.flat().some((e) => e.endsWith('.ts'))) {
        throw new Error(`${root}: no root file may lie below the layer of '*.ts'`);
      }
      const may = below.map((l) => l.map(nameOf).join(', ')).join('; ') || 'nothing else of its service';
      const where = entry === '*.ts' ? `the root files of ${root}` : `${root}/${entry}`;
      const message = `${where} may import only ${may} ${DIRECTION}`;
      const rule = (prefix) => [
        'error',
        { patterns: [{ regex: forbiddenPattern(prefix, forbidden), message }] },
      ];
      if (entry.endsWith('/')) {
        // a file `depth` folders below src reaches src with `depth` steps up
        for (let depth = 1; depth <= 4; depth++) {
          const files = [`${root}/${entry}${'*/'.repeat(depth - 1)}*.ts`];
          configs.push({ files, rules: { 'no-restricted-imports': rule(`(?:\\.\\./){${depth}}`) } });
        }
      } else {
        const files = [`${root}/${entry}`];
        const ignores = entry === '*.ts' ? named.map((e) => `${root}/${e}`) : [];
        configs.push({ files, ignores, rules: { 'no-restricted-imports': rule('\\./') } });
      }
    }
  });
  return configs;
}

const TEST_FILES = ['**/*.test.ts', '**/test/**/*.ts'];

/** One `@typescript-eslint/no-restricted-imports` config per package: what it may import, and testkit in tests. */
function packageRules() {
  const allowed = Object.fromEntries([
    ...packageLayers.flatMap((layer, i) => layer.map((name) => [name, packageLayers.slice(0, i).flat()])),
    ...Object.entries(PACKAGES_ASIDE),
  ]);
  return Object.entries(allowed).flatMap(([name, may]) => {
    const dir = PACKAGE_DIRS[name];
    const forbidden = Object.keys(PACKAGE_DIRS).filter(
      (n) => n !== name && n !== 'testkit' && !may.includes(n),
    );
    const listed = may.map((n) => `@vab/${n}`).join(', ') || 'no workspace package';
    const message = `@vab/${name} may import only ${listed}, and @vab/testkit in its tests ${DIRECTION}`;
    const rule = (names) => [
      'error',
      { patterns: [{ regex: `^@vab/(?:${names.map(escape).join('|')})(?:/|$)`, message }] },
    ];
    return [
      {
        files: [`${dir}/**/*.ts`],
        ignores: TEST_FILES,
        rules: { '@typescript-eslint/no-restricted-imports': rule([...forbidden, 'testkit']) },
      },
      {
        files: TEST_FILES.map((g) => `${dir}/${g}`),
        rules: { '@typescript-eslint/no-restricted-imports': rule(forbidden) },
      },
    ];
  });
}

/** The configs that hold the direction of imports (the layout test lints with them alone, and fast). */
export const directionRules = [
  ...Object.entries(layers).flatMap(([root, serviceLayers]) => layerRules(root, serviceLayers)),
  ...packageRules(),
];

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/.turbo/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Tests read loosely typed JSON bodies; production code keeps `any` out.
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['tests/**/*.ts', '**/*.test.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  // a long function is a switch that wants to be a table, or phases that want names
  { files: ['**/*.ts', '**/*.mjs'], rules: { 'max-lines-per-function': ['error', { max: 100 }] } },
  // a test file's describe() holds its cases
  { files: ['**/*.test.ts'], rules: { 'max-lines-per-function': 'off' } },
  // the direction of imports: within each service, and between the workspace packages
  ...directionRules,
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        fetch: 'readonly',
        Buffer: 'readonly',
        performance: 'readonly',
      },
    },
  },
  // the console, the public talk page and widget, and their shared voice client run in a browser: its
  // globals, as modules
  {
    files: ['services/gateway/console/**/*.js', 'services/gateway/live/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: {
        document: 'readonly',
        sessionStorage: 'readonly',
        fetch: 'readonly',
        EventSource: 'readonly',
        TextDecoderStream: 'readonly',
        URLSearchParams: 'readonly',
        AbortController: 'readonly',
        ResizeObserver: 'readonly',
        setTimeout: 'readonly',
        window: 'readonly',
        navigator: 'readonly',
        Element: 'readonly',
        WebSocket: 'readonly',
        AudioContext: 'readonly',
        AudioWorkletNode: 'readonly',
        AbortSignal: 'readonly',
        CustomEvent: 'readonly',
        EventTarget: 'readonly',
        TransformStream: 'readonly',
      },
    },
  },
  // The console's modules import one way (services/gateway/console/main.js says why): main.js → panels/ →
  // store/ → ui/ → lib/. Nothing imports main.js, a panel imports no other panel, and nothing below imports
  // what is above it; lib/ (the API) has no DOM. tests/console-layers.test.ts shows an import against the
  // direction fails here.
  ...consoleLayers({
    'lib/**': { above: ['ui', 'store', 'panels'], noDom: true },
    'ui/**': { above: ['store', 'panels'] },
    'store/**': { above: ['panels'] },
    'panels/**': { above: [], siblings: true },
  }),
  // the voice client's AudioWorklet modules run in the AudioWorkletGlobalScope
  {
    files: ['services/gateway/live/voice/*-worklet.js'],
    languageOptions: {
      globals: { AudioWorkletProcessor: 'readonly', registerProcessor: 'readonly', sampleRate: 'readonly' },
    },
  },
);
