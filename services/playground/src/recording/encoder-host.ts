import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { safeError, type Logger } from '@vab/bus';
import { builtScript } from './built-script.js';

interface Pending {
  input: Readable;
  fifo: string;
  resolve(): void;
  reject(err: Error): void;
}

/**
 * Runs the recordings' encoders through the encoder host (`encoder-process.ts`), a small process started once,
 * so this one never forks again: each encoder reads its PCM from a named pipe this process writes into.
 */
export class EncoderHost {
  private child: ChildProcess | undefined;
  private next = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(private readonly log: Logger) {}

  /** Starts the host now (while this process is small: its one fork is cheap), not at the first recording. */
  start(): void {
    if (this.child) return;
    const file = builtScript(import.meta.url, 'encoder-process.js');
    // a process group of its own: a terminal's Ctrl-C (sent to the whole group) must not kill the encoders of
    // the sessions this process is ending; the host exits when this process closes its stdin, or dies
    const child = spawn(process.execPath, [file], { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
    this.child = child;
    child.stdin.on('error', () => undefined);
    createInterface({ input: child.stdout }).on('line', (line) => this.heard(line));
    child.on('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      if (this.pending.size > 0 || code !== 0) {
        this.log.warn({ code: 'RECORDING_NOT_STORED', exit: code, signal }, 'recording encoder host exited');
      }
      for (const [id, job] of this.pending) {
        this.pending.delete(id);
        job.reject(new Error('the encoder host exited'));
      }
    });
  }

  /**
   * Runs `command args` (an encoder reading the named pipe `fifo`, which it makes), feeds it `input`, and
   * resolves when it has exited cleanly.
   */
  encode(command: string, args: string[], fifo: string, input: Readable): Promise<void> {
    this.start();
    const id = this.next++;
    return new Promise<void>((resolve, reject) => {
      this.pending.set(id, { input, fifo, resolve, reject });
      this.child!.stdin!.write(`${JSON.stringify({ id, command, args, fifo })}\n`);
    });
  }

  private heard(line: string): void {
    let msg: { id: number; ready?: boolean; exit?: number | null; error?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return;
    }
    const job = this.pending.get(msg.id);
    if (!job) return;
    if (msg.ready) {
      // opening a pipe for writing waits for its reader (the encoder): on the thread pool, not this loop
      const out = createWriteStream(job.fifo);
      out.on('error', (err) => this.log.debug({ err: safeError(err) }, 'recording pipe closed'));
      job.input.pipe(out);
      return;
    }
    this.pending.delete(msg.id);
    if (msg.exit === 0) job.resolve();
    else job.reject(new Error(`the encoder exited ${String(msg.exit)}: ${msg.error ?? ''}`));
  }

  /** Closes the host's input: it stops what still runs and exits. */
  stop(): void {
    this.child?.stdin?.end();
    this.child = undefined;
  }
}
