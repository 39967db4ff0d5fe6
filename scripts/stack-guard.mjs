#!/usr/bin/env node
// The guard of `npm start` (scripts/stack.mjs): stops what the stack started when the stack's supervisor dies
// without stopping it (SIGKILL, a crash, a closed terminal). The supervisor starts it first, in a process
// group of its own, and tells it over their IPC channel every process it starts (`{ pid, kind }`) and every one
// that exits (`{ gone: pid }`). The services watch their own channel to the supervisor and stop at once when it
// closes (service-kit); nats-server and redis-server cannot, so when the guard's channel closes it waits for the
// services to go (they drain into the servers), then stops the servers, and kills whatever is left at
// GUARD_BOUND_MS. After the supervisor's own stop, every process is gone already and the guard just exits.
import { readFileSync } from 'node:fs';

/** Everything the stack started is gone by then (the README's "no process of the stack left after 2 s"). */
const GUARD_BOUND_MS = 1500;
/** How long the services get to stop by themselves before the servers are stopped under them. */
const SERVICES_MS = 1000;
const POLL_MS = 20;

/** @type {Map<number, 'service' | 'server'>} */
const started = new Map();

process.on('message', (m) => {
  if (typeof m?.gone === 'number') started.delete(m.gone);
  else if (typeof m?.pid === 'number') started.set(m.pid, m.kind === 'server' ? 'server' : 'service');
});
process.once('disconnect', () => void reap());

/** Alive, and not a zombie waiting for its new parent to reap it. */
function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    // Linux: the state after the command's closing parenthesis
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

const signal = (pid, sig) => {
  try {
    process.kill(pid, sig);
  } catch {
    // gone already
  }
};

/** Resolves once none of `pids` is alive, or at `until` (a time). */
async function gone(pids, until) {
  while (pids.some(alive) && Date.now() < until) await new Promise((r) => setTimeout(r, POLL_MS));
}

async function reap() {
  const t0 = Date.now();
  const of = (kind) => [...started].filter(([, k]) => k === kind).map(([pid]) => pid);
  await gone(of('service'), t0 + SERVICES_MS);
  for (const pid of of('server')) signal(pid, 'SIGTERM');
  const all = [...started.keys()];
  await gone(all, t0 + GUARD_BOUND_MS);
  for (const pid of all.filter(alive)) signal(pid, 'SIGKILL');
  process.exit(0);
}
