#!/usr/bin/env node
// `npm test` (after the build): the whole suite, and beside it the storing services' tests once more on a Redis
// Cluster (scripts/test-cluster.mjs). Side by side because the suite leaves cores idle: its voice tests wait on
// speech paced in real time (`/usr/bin/time -v`: 0.8 of the two cores over a whole run), so the cluster run,
// once a step of its own at the end, fits in that gap: 574 s + 93 s one after the other, 583 s side by side.
// The cluster run's output is kept in a file and printed after the suite's, so the two never interleave.
// One after the other when NATS_URL or REDIS_URL names a shared server: two runs' stacks on one server would
// answer each other's requests. Arguments (files, `-t` filters) are the suite's, and such a run is the suite's
// alone. Ctrl-C or a SIGTERM reaches both runs, and what is left of them is stopped before this exits.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { busyCores } from './lib/busy-cores.mjs';
import { runGroup, signalGroups } from './lib/process-group.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const shared = Boolean(process.env.NATS_URL || process.env.REDIS_URL);
let stoppedBy;

// each run has a process group of its own (lib/process-group.mjs): a signal to this process is passed on to
// them, Ctrl-C included (a terminal's reaches this group only)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stoppedBy ??= signal;
    signalGroups(signal);
  });
}

/** Runs a command to its end (and what it left of its group): its exit code, or 1 when a signal ended it. */
const run = (command, argv, stdio) =>
  stoppedBy ? Promise.resolve(1) : runGroup(command, argv, { cwd: root, stdio });

const busy = args.length === 0 ? await busyCores() : 0;
// A voice test's speech is paced in real time: on a machine another process keeps busy (a build, a CPU hog),
// three files at once starved their models (the end-of-turn model's answer past LiveKit's 1 s, a session not
// yet closed when its greeting would have played out), so the suite then runs two at a time, and the cluster
// run after it.
const crowded = busy >= 0.75;
if (crowded)
  console.log(
    `[test] other work keeps ${busy.toFixed(1)} of ${availableParallelism()} cores busy: two files at a time, the Redis Cluster run after the suite`,
  );

// vitest itself, not through npx: npx does not pass a SIGTERM on, and vitest would go on orphaned
const vitest = join(root, 'node_modules/vitest/vitest.mjs');
// its input none: a process group of its own is a background one to a terminal, which stops it if it reads
const suiteRun = () =>
  run(
    process.execPath,
    [vitest, 'run', ...(crowded ? ['--maxWorkers=2'] : []), ...args],
    ['ignore', 'inherit', 'inherit'],
  );
const clusterRun = (stdio) => run(process.execPath, [join(root, 'scripts/test-cluster.mjs')], stdio);

let suite;
let clustered = 0;
if (args.length > 0) {
  console.log(
    '[test] the suite with these arguments; the Redis Cluster run is left out: `npm test` runs both',
  );
  suite = await suiteRun();
} else if (shared || crowded) {
  suite = await suiteRun();
  clustered = await clusterRun(['ignore', 'inherit', 'inherit']);
} else {
  console.log(
    '[test] the storing services on a Redis Cluster run beside the suite; their output follows its',
  );
  const logDir = mkdtempSync(join(tmpdir(), 'vab-test-cluster-'));
  const logFile = join(logDir, 'output.log');
  const logFd = openSync(logFile, 'w');
  const cluster = clusterRun(['ignore', logFd, logFd]);
  suite = await suiteRun();
  console.log('\n[test] the suite is done; the storing services on a Redis Cluster, run beside it:');
  clustered = await cluster;
  closeSync(logFd);
  process.stdout.write(readFileSync(logFile));
  rmSync(logDir, { recursive: true, force: true });
}
const outcome = (code) =>
  stoppedBy ? `stopped by ${stoppedBy}` : code === 0 ? 'passed' : `failed (exit ${code})`;
console.log(
  `[test] suite: ${outcome(suite)}; on a Redis Cluster: ${args.length > 0 ? 'not run' : outcome(clustered)}`,
);
process.exitCode = stoppedBy
  ? 128 + (stoppedBy === 'SIGINT' ? 2 : 15)
  : suite === 0 && clustered === 0
    ? 0
    : 1;
