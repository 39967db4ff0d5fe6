import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { isLiveKitStrayRejection } from './services/playground/src/models/stray-rejections.js';

const src = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The files that spend a minute or more in real-time speech and processes (measured with
 * `npx vitest run --reporter=json`, docs/performance.md "The test suite"), longest first. Vitest orders a run
 * by the durations it cached from the last one; a clean clone (CI) has none and orders by file size, which
 * started the 80 s benchmark smoke test last, alone: the run's final 80 s used one worker.
 */
const LONGEST_FIRST = [
  'tests/integration/voice/voice.test.ts',
  'tests/bench-smoke.test.ts',
  'tests/integration/stack/resume.test.ts',
  'tests/integration/stack/resilience.test.ts',
  'tests/integration/voice/voice-preemptive.test.ts',
  'tests/integration/runs/voice-simulations.test.ts',
  'tests/integration/voice/telephony.test.ts',
  'tests/integration/console/talk.test.ts',
  'tests/integration/stack/playground-threads.test.ts',
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const i = LONGEST_FIRST.findIndex((name) => file.moduleId.endsWith(name));
      return i === -1 ? LONGEST_FIRST.length : i;
    };
    return sorted
      .map((file, i) => ({ file, i }))
      .sort((a, b) => rank(a.file) - rank(b.file) || a.i - b.i)
      .map(({ file }) => file);
  }
}

export default defineConfig({
  resolve: {
    // Tests run the TypeScript sources of every workspace package (no build needed for a test run).
    alias: {
      '@vab/contracts': src('./packages/contracts/src/index.ts'),
      '@vab/bus': src('./packages/bus/src/index.ts'),
      '@vab/service-kit': src('./packages/service-kit/src/index.ts'),
      '@vab/storage': src('./packages/storage/src/index.ts'),
      '@vab/egress': src('./packages/egress/src/index.ts'),
      '@vab/flow': src('./packages/flow/src/index.ts'),
      '@vab/testkit': src('./packages/testkit/src/index.ts'),
      '@vab/client': src('./packages/client/src/index.ts'),
      '@vab/agents': src('./services/agents/src/index.ts'),
      '@vab/sessions': src('./services/sessions/src/index.ts'),
      '@vab/playground': src('./services/playground/src/index.ts'),
      '@vab/gateway': src('./services/gateway/src/index.ts'),
      '@vab/telephony': src('./services/telephony/src/index.ts'),
      '@vab/webhooks': src('./services/webhooks/src/index.ts'),
    },
  },
  test: {
    include: [
      'packages/*/src/**/*.test.ts',
      'services/*/src/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'tests/**/*.test.ts',
    ],
    globalSetup: ['./tests/global-setup.ts'],
    testTimeout: 30_000,
    // a hook starts a stack: its first start in a file imports the services' module graph (LiveKit's with it)
    // through vite's transform, which alone took over 30 s at load average 26 on 2 cores; a hook that hangs
    // still fails, later
    hookTimeout: 120_000,
    // Three files at once on two cores: most of a voice test's time is real-time speech and waiting on
    // processes, and with two the cores sat idle 40-60 % of the time. On this 2-core machine the suite took
    // 803 s with two (file-size order) and 535 s with three (longest first), every test passing
    // (docs/performance.md "The test suite").
    maxWorkers: 3,
    sequence: { sequencer: LongestFirst },
    // LiveKit's failed model requests also reject a promise nobody awaits; the playground's main survives these
    // (services/playground/src/models/stray-rejections.ts), and so do the stacks tests run in-process
    onUnhandledError: (error) => !isLiveKitStrayRejection(error),
    // Each stack normally starts its own NATS and Redis. With NATS_URL/REDIS_URL naming existing servers the
    // stacks share them, and their services would answer each other's requests: files then run one at a time.
    fileParallelism: !(process.env.NATS_URL || process.env.REDIS_URL),
  },
});
