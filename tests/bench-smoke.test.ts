import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { requireBuilt } from './helpers/processes.js';

// Benchmarks are scripts, not tests: this only keeps them runnable (at tiny sizes, nothing timed is asserted).
// One broke unnoticed once, when rate limits arrived.
const run = promisify(execFile);
const bench = (file: string) => join(import.meta.dirname, '..', 'bench', file);

describe('benchmarks still run', () => {
  beforeAll(requireBuilt);
  it.each([
    ['list-agents.mjs', ['200'], /\| 200 \|/],
    ['playground-memory.mjs', ['20'], /left behind: rooms 0, sessions 0, agents not stopped 0/],
    ['playground-scale.mjs', ['--sessions', '6', '--join-ms', '5'], /\| 3 \|/],
    ['bus-floor.mjs', ['--seconds', '1'], /\| nats-server \| [\d.]+ \| [\d.]+ \| [\d.]+ \|/],
    [
      'redis-timing.mjs',
      ['--commands', '2000', '--rounds', '1'],
      /\| sendCommand wrapper \(createRedis\) \| [\d.]+ \|/,
    ],
    ['metrics.mjs', ['--seconds', '1', '--every', '200'], /\| gateway \/metrics \| idle \| \d+ \|/],
    ['voice.mjs', ['--frames', '20', '--sessions', '1', '--turns', '1'], /turns measured: \d+ of 1/],
    ['control-flood.mjs', ['--probes', '2'], /start → ready p99 under the flood: [\d.]+× quiet/],
    ['egress-check.mjs', ['--calls', '20'], /new connection per call: .* added at p50 -?[\d.]+ ms/],
    ['webhooks.mjs', ['--events', '20', '--backlog', '50'], /\| backlog \| 50 \|/],
    ['docs-render.mjs', ['--runs', '1', '--visits', '1'], /\| 1st \(nothing cached\) \| \d+ \/ \d+ \|/],
    ['phone.mjs', ['--frames', '200'], /\| in \(Twilio → bus\) \| [\d.]+ \|/],
    ['canary-check.mjs', ['--sizes', '20', '--checks', '2'], /\| 20 \| counted \|/],
    ['analysis.mjs', ['--calls', '5', '--over', '1', '--model-ms', '0'], /\| calls analysed \| 5 \/ 5 \|/],
  ])(
    '%s',
    async (file, args, expected) => {
      // bounds for a machine other work loads (Chromium's page render took 61 s under CI's load and a CPU
      // hog, 11 s quiet): a smoke run asserts that it ends with its figures, never how soon
      const { stdout } = await run(process.execPath, ['--expose-gc', bench(file), ...args], {
        timeout: 150_000,
      });
      expect(stdout).toMatch(expected);
    },
    180_000,
  );
});
