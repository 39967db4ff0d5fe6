import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { writeToneRecording } from '@vab/testkit';
import { describe, expect, it } from 'vitest';
import { oggDurationMs } from './audio-recording.js';
import { sweepSpools } from './spool.js';

describe('a recording file', () => {
  it("is as long as its last page's granule position says, less the pre-skip", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ogg-'));
    const file = join(dir, 'a.ogg');
    // 2.5 s of a tone, stereo, at the recorder's rate, encoded as the recorder does
    writeToneRecording(file, 2.5);
    expect(await oggDurationMs(file)).toBe(2500);
    writeFileSync(join(dir, 'empty.ogg'), '');
    expect(await oggDurationMs(join(dir, 'empty.ogg'))).toBeUndefined();
    expect(await oggDurationMs(join(dir, 'missing.ogg'))).toBeUndefined();
  });
});

describe('the recording spools', () => {
  it("are swept at start when their process is gone, never a live process's", async () => {
    const dead = join(tmpdir(), 'vab-recordings-999999999');
    const live = join(tmpdir(), `vab-recordings-${process.ppid}`);
    for (const dir of [dead, live]) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'x.ogg'), 'x');
    }
    await sweepSpools(pino({ level: 'silent' }));
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(join(live, 'x.ogg'))).toBe(true);
  });
});
