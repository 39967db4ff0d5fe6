import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run the TypeScript sources of every workspace package (no build needed for a test run).
    alias: {
      '@vab/contracts': src('./packages/contracts/src/index.ts'),
      '@vab/bus': src('./packages/bus/src/index.ts'),
      '@vab/storage': src('./packages/storage/src/index.ts'),
      '@vab/testkit': src('./packages/testkit/src/index.ts'),
      '@vab/agents': src('./services/agents/src/index.ts'),
      '@vab/sessions': src('./services/sessions/src/index.ts'),
      '@vab/gateway': src('./services/gateway/src/index.ts'),
    },
  },
  test: {
    include: ['packages/*/src/**/*.test.ts', 'services/*/src/**/*.test.ts', 'tests/**/*.test.ts'],
    globalSetup: ['./tests/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Integration files share one NATS and one Redis; each uses its own key prefix-free data (fresh ids),
    // so files may run in parallel, but 2 vCPUs are better spent on fewer workers.
    maxWorkers: 2,
  },
});
