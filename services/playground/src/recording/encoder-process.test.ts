import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it, vi } from 'vitest';

/**
 * The recordings' encoder host, as the playground runs it (its build), left by a playground that died: it
 * ends, and its encoders with it, even one still waiting for its pipe's writer (the playground died first).
 */
const host = join(import.meta.dirname, '..', '..', 'dist', 'recording', 'encoder-process.js');
const dir = mkdtempSync(join(tmpdir(), 'encoder-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the encoder host, its playground gone', () => {
  it('ends with its encoders, one waiting on its pipe included', async () => {
    if (!existsSync(host))
      throw new Error('services/playground/dist is missing: run `npx turbo run build` first');
    // the FFmpeg LiveKit ships, which recordings use (recorder-io.ts)
    const command = join(
      import.meta.dirname,
      '..',
      '..',
      '..',
      '..',
      'node_modules',
      '@livekit/av-linux-x64/ffmpeg',
    );
    const child = spawn(process.execPath, [host], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const ready = new Promise<void>((resolve) =>
      lines.on('line', (l) => l.includes('"ready":true') && resolve()),
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const fifo = join(dir, 'call.pcm');
    child.stdin.write(
      `${JSON.stringify({ id: 1, command, args: ['-loglevel', 'error', '-f', 's16le', '-ar', '16000', '-ac', '1', '-i', fifo, '-f', 'null', '-'], fifo })}\n`,
    );
    await ready;
    // FFmpeg in its pipe's open, waiting for a writer (its signal handlers installed by then)
    const waiting = () => {
      const children = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8')
        .trim()
        .split(' ');
      return children.some((pid) => {
        try {
          return readFileSync(`/proc/${pid}/wchan`, 'utf8') === 'wait_for_partner';
        } catch {
          return false;
        }
      });
    };
    await vi.waitFor(() => expect(waiting()).toBe(true), { timeout: 10_000, interval: 50 });
    // the playground dies before it opens the pipe: its end of stdin closes
    child.stdin.end();
    try {
      expect(await exited).toBe(0);
    } finally {
      // a failed run leaves no host, nor its encoder, behind
      if (child.exitCode === null && child.signalCode === null) {
        for (const pid of readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').split(' '))
          if (pid.trim()) process.kill(Number(pid), 'SIGKILL');
      }
      child.kill('SIGKILL');
    }
  }, 30_000);
});
