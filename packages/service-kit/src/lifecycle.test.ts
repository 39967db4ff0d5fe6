import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const built = fileURLToPath(new URL('../dist/index.js', import.meta.url));

/**
 * A service process as a supervisor runs it: its log on a pipe to its parent. Its work (a timer here, a NATS
 * connection in a service) keeps it alive until its shutdown ends it: without it the process would end on its
 * own, and its exit would say nothing of the stop's.
 */
const SERVICE = `
import { createLogger, runService } from ${JSON.stringify(built)};
const log = createLogger('probe', 'info');
runService(log, 5000, async () => {
  const work = setInterval(() => undefined, 1000);
  log.info('serving');
  return async () => clearInterval(work);
});
`;

describe('runService', () => {
  it('exits on SIGTERM within its bound when the reader of its log is gone', async () => {
    if (!existsSync(built)) throw new Error('packages/service-kit is not built: npx turbo run build');
    const child = spawn(process.execPath, ['--input-type=module', '-e', SERVICE], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => d.toString().includes('serving') && resolve());
        child.on('exit', (code) => reject(new Error(`exited ${code} before serving`)));
      });
      // the supervisor goes away: nobody reads the log any more, and the stop comes as its last act
      child.stdout.destroy();
      const exited = new Promise<string>((resolve) =>
        child.on('exit', (code, signal) => resolve(signal ?? `exit ${code}`)),
      );
      child.kill('SIGTERM');
      const code = await Promise.race([
        exited,
        new Promise((r) => setTimeout(() => r('still running'), 6000)),
      ]);
      expect(code).toBe('exit 0');
    } finally {
      child.kill('SIGKILL');
    }
  }, 15_000);
});
