import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { PlaygroundThreads } from './supervisor.js';

// A thread as the supervisor sees one (the messages of threads/messages.ts), without a playground instance in
// it: thread 2 ends while it starts, every other says it is ready and, when told to stop, that it drained.
const THREAD = `
import { parentPort, workerData } from 'node:worker_threads';
const { index } = workerData;
if (index === 2) setTimeout(() => process.exit(3), 50);
else parentPort.postMessage({ type: 'ready' });
parentPort.on('message', (msg) => {
  if (msg.type !== 'stop') return;
  parentPort.postMessage({ type: 'drained', mode: msg.mode });
  setTimeout(() => process.exit(0), 20);
});
`;

describe('the playground’s threads (threads/supervisor.ts)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vab-threads-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('stops the threads that had started, drained, when one ends while starting', async () => {
    const script = join(dir, 'thread.mjs');
    writeFileSync(script, THREAD);
    const config = loadConfig({ NATS_URL: 'nats://127.0.0.1:1', PLAYGROUND_THREADS: '3' });
    const told: { thread: number; msg: unknown }[] = [];
    const threads = new PlaygroundThreads({
      config,
      env: {},
      log: pino({ level: 'silent' }),
      write: () => undefined,
      script,
      onMessage: (thread, msg) => told.push({ thread, msg }),
    });
    await expect(threads.start()).rejects.toThrow('playground thread 2 exited 3 while starting');
    // thread 1 served before thread 2 failed: it was told to drain and did, before start() gave up; thread 0
    // (the rooms thread, started last) never started
    expect(told).toEqual([{ thread: 1, msg: { type: 'drained', mode: 'drain' } }]);
    expect(await threads.died).toEqual({ thread: 2, code: 3 });
  });
});
