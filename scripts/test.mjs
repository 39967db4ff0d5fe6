#!/usr/bin/env node
// `npm test` (after the build): the whole suite, and beside it the storing services' tests once more on a Redis
// Cluster (scripts/test-cluster.mjs). Side by side because the suite leaves cores idle: its voice tests wait on
// speech paced in real time (`/usr/bin/time -v`: 0.8 of the two cores over a whole run), so the cluster run,
// once a step of its own at the end, fits in that gap: 574 s + 93 s one after the other, 583 s side by side.
// The cluster run's output is kept in a file and printed after the suite's, so the two never interleave.
// Arguments (files, `-t` filters) are the suite's, and such a run is the suite's alone.
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);

/** Runs a command to its end: its exit code, or 1 when a signal ended it. */
function run(command, argv, stdio) {
  return new Promise((resolve) => {
    const child = spawn(command, argv, { cwd: root, stdio });
    child.on('error', (error) => {
      console.error(`[test] ${command} did not start: ${error.message}`);
      resolve(1);
    });
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

const logDir = args.length === 0 ? mkdtempSync(join(tmpdir(), 'vab-test-cluster-')) : undefined;
const logFile = logDir && join(logDir, 'output.log');
const logFd = logFile && openSync(logFile, 'w');
const cluster = logFd
  ? run(process.execPath, [join(root, 'scripts/test-cluster.mjs')], ['ignore', logFd, logFd])
  : Promise.resolve(0);
const suite = await run('npx', ['vitest', 'run', ...args], 'inherit');
if (logFile)
  console.log('\n[test] the suite is done; the storing services on a Redis Cluster, run beside it:');
const clustered = await cluster;
if (logFile && logDir) {
  process.stdout.write(readFileSync(logFile));
  rmSync(logDir, { recursive: true, force: true });
  console.log(
    `[test] suite: ${suite === 0 ? 'passed' : `failed (exit ${suite})`}; on a Redis Cluster: ${
      clustered === 0 ? 'passed' : `failed (exit ${clustered})`
    }`,
  );
}
process.exit(suite === 0 && clustered === 0 ? 0 : 1);
