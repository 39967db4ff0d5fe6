/**
 * The encoder host: a small process of its own that starts the recordings' FFmpeg encoders for the playground,
 * so the playground never forks. Forking copies the forking process's page tables: in a playground holding
 * the voice models and tens of sessions (~900 MB), one spawn blocked its event loop 40–150 ms here, every
 * session's turns with it (docs/performance.md › Recordings). This process stays small, so its forks are cheap.
 *
 * Protocol, one JSON object per line. In (stdin): `{ id, command, args, fifo }`: make the named pipe `fifo`,
 * then run `command args` (which reads it). Out (stdout): `{ id, ready: true }` once the pipe exists (the
 * playground then writes its PCM into it), `{ id, exit, error? }` when the encoder is done. Stdin closed (the
 * playground stopped or died): the encoders still running are stopped, and it exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { createInterface } from 'node:readline';

interface Job {
  id: number;
  command: string;
  args: string[];
  fifo: string;
}

const send = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);
// the playground gone (killed): its end of the pipe is closed, and no one is left to tell
process.stdout.on('error', () => undefined);

/** The encoders running: stopped when the playground is gone (stdin closed), as no one will write to them. */
const children = new Set<ChildProcess>();

function run(command: string, args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    // in a group of their own, as the host: stopped by the host, never by a signal meant for the playground
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    children.add(child);
    child.on('exit', () => children.delete(child));
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    child.on('error', (err) => resolve({ code: -1, stderr: err.message }));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

async function encode(job: Job): Promise<void> {
  const made = await run('mkfifo', ['-m', '600', job.fifo]);
  if (made.code !== 0) {
    send({ id: job.id, exit: made.code, error: `mkfifo: ${made.stderr}` });
    return;
  }
  const done = run(job.command, job.args);
  send({ id: job.id, ready: true });
  const { code, stderr } = await done;
  await rm(job.fifo, { force: true });
  send({ id: job.id, exit: code, ...(code === 0 ? {} : { error: stderr }) });
}

const running = new Set<Promise<void>>();
/** How long an encoder has to end once the playground is gone, before it is killed. */
const STRAGGLER_KILL_MS = 2_000;
for await (const line of createInterface({ input: process.stdin })) {
  let job: Job;
  try {
    job = JSON.parse(line) as Job;
  } catch {
    continue;
  }
  const task = encode(job).finally(() => running.delete(task));
  running.add(task);
}
// the playground has closed its end: at a clean stop its sessions' encoders are done already. One whose
// playground died before it opened its pipe waits in that open for a writer that will never come, where
// SIGTERM does not end it (FFmpeg notes the signal and goes back to waiting): killed outright after a moment
for (const child of children) child.kill('SIGTERM');
const stragglers = setTimeout(() => {
  for (const child of children) child.kill('SIGKILL');
}, STRAGGLER_KILL_MS);
await Promise.all(running);
clearTimeout(stragglers);
