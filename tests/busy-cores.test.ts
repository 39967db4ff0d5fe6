import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { busyCores } from '../scripts/lib/busy-cores.mjs';

// `npm test` runs two files at a time, not three, when other work keeps a core busy (scripts/test.mjs)
describe('the cores other work keeps busy, as npm test reads them', () => {
  it('counts a process spinning on a core', async () => {
    const hog = spawn(process.execPath, ['-e', 'for (;;);']);
    try {
      await new Promise((resolve) => hog.once('spawn', resolve));
      expect(await busyCores(1000)).toBeGreaterThanOrEqual(0.75);
    } finally {
      hog.kill('SIGKILL');
    }
  });
});
