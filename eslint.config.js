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
  // the console page runs in a browser (services/gateway/console): its globals, as a module
  {
    files: ['services/gateway/console/**/*.js'],
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
  // its AudioWorklet modules run in the AudioWorkletGlobalScope
  {
    files: ['services/gateway/console/*-worklet.js'],
    languageOptions: {
      globals: { AudioWorkletProcessor: 'readonly', registerProcessor: 'readonly', sampleRate: 'readonly' },
    },
  },
);
