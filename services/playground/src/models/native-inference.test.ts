import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * A worker thread that exits while native inference is on its way aborts the whole process (the addon throws
 * into the torn-down thread: SIGABRT); halted first, it exits alone. Run in a process of its own, which
 * starts the thread: 8 VADs predicting back to back on libuv's pool, as 8 sessions' do, then the thread's exit
 * as a crashed playground thread's (thread-main.ts).
 */
const packageDir = join(import.meta.dirname, '..', '..');
const built = join(packageDir, 'dist', 'models', 'native-inference.js');

const thread = `
  import { createRequire } from 'node:module';
  const local = createRequire(${JSON.stringify(join(packageDir, 'package.json'))})('@livekit/local-inference');
  const { haltNativeInference, nativeInference } = await import(${JSON.stringify(pathToFileURL(built).href)});
  const window = new Int16Array(local.VAD_WINDOW_SAMPLES);
  let predictions = 0;
  const loop = (vad) => nativeInference(() => vad.predict(window)).then(() => (predictions++, loop(vad)));
  Array.from({ length: 8 }, () => local.createVad()).forEach(loop);
  setTimeout(() => {
    console.log('predictions', predictions);
    void haltNativeInference(5000).finally(() => process.exit(1));
  }, 300);
`;
const process_ = `
  import { Worker } from 'node:worker_threads';
  const worker = new Worker(${JSON.stringify(thread)}, { eval: true, type: 'module' });
  worker.on('exit', (code) => console.log('thread exited', code));
  setTimeout(() => console.log('process alive'), 500);
`;

describe('native inference in a thread that exits', () => {
  beforeAll(() => {
    if (!existsSync(built))
      throw new Error('services/playground/dist is missing: run `npx turbo run build` first');
  });

  it('is halted and drained first: the thread exits, the process lives on', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', process_]);
    expect(stdout).toMatch(/predictions [1-9]\d*/);
    expect(stdout).toContain('thread exited 1');
    expect(stdout).toContain('process alive');
  });
});
