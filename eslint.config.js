import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
      },
    },
  },
  // its AudioWorklet modules run in the AudioWorkletGlobalScope
  {
    files: ['services/gateway/console/*-worklet.js'],
    languageOptions: {
      globals: { AudioWorkletProcessor: 'readonly', registerProcessor: 'readonly', sampleRate: 'readonly' },
    },
  },
);
