import { WebSocket } from 'ws';

/** What the agent sent, as the client played it. */
export interface PlayedSegment {
  /** When its first audible sample played (ms since the client connected). */
  audibleAt: number | undefined;
  startedAt: number;
  playedMs: number;
  interrupted: boolean;
}

export interface VoiceClientOptions {
  url: string;
  headers?: Record<string, string>;
  sampleRate?: number;
  frameMs?: number;
}

const AUDIBLE = 330;

/**
 * A voice client as a browser is one: it streams its microphone in real time (silence included, frame by
 * frame on the wall clock), plays the agent's audio in real time from a buffer, and reports playback as the
 * protocol asks — `playback_finished` when a flushed segment has played out, or after a `playback_clear`
 * with how much of the segment was heard. Tests and benchmarks drive it with `say()`.
 */
export class VoiceClient {
  readonly socket: WebSocket;
  readonly events: { type: string; [k: string]: unknown }[] = [];
  readonly segments: PlayedSegment[] = [];
  /** The server's playback messages (`playback_flush`, `playback_clear`, `playback_pause`, …), in order. */
  readonly controls: string[] = [];
  readonly connectedAt = Date.now();
  closed: Promise<{ code: number; reason: string }>;
  ready: Promise<void>;
  /** The server's `ready` (its resume token: a new socket with `?resume=` takes the session back). */
  readyMessage: { sessionId: string; resumeToken: string; resumeWithinMs: number } | undefined;
  private readonly rate: number;
  private readonly frameSamples: number;
  private queue: Int16Array[] = [];
  private queuedSamples = 0;
  private mic: Int16Array[] = [];
  private segment: PlayedSegment | undefined;
  private flushPending = false;
  private paused = false;
  private tick: NodeJS.Timeout | undefined;
  private startedAt = 0;
  private frames = 0;

  constructor(opts: VoiceClientOptions) {
    this.rate = opts.sampleRate ?? 16000;
    this.frameSamples = (this.rate * (opts.frameMs ?? 20)) / 1000;
    this.socket = new WebSocket(opts.url, { headers: opts.headers });
    this.closed = new Promise((resolve) =>
      this.socket.on('close', (code, reason) => {
        clearInterval(this.tick);
        resolve({ code, reason: reason.toString() });
      }),
    );
    this.ready = new Promise((resolve, reject) => {
      this.socket.on('error', reject);
      // the upgrade refused with an HTTP answer (401, 404…): with this listener, ending the request is ours
      this.socket.on('unexpected-response', (req, res) => {
        reject(new Error(`refused: ${res.statusCode}`));
        req.destroy();
      });
      this.socket.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary)
          return this.received(
            new Int16Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)),
          );
        const m = JSON.parse(data.toString('utf8')) as { type: string; event?: { type: string } };
        if (m.type === 'ready') {
          this.readyMessage = m as never;
          this.start();
          resolve();
        } else if (m.type === 'event') this.events.push(m.event as never);
        else this.control(m.type);
      });
      this.socket.on('close', (code, reason) =>
        reject(new Error(`closed before ready: ${code} ${reason.toString()}`)),
      );
    });
  }

  /** Queues speech into the microphone (it plays out in real time after what is queued). */
  say(pcm: Int16Array): void {
    this.mic.push(pcm);
  }

  /** Ms of the client's microphone audio still queued. */
  get micQueuedMs(): number {
    return (this.mic.reduce((n, p) => n + p.length, 0) / this.rate) * 1000;
  }

  /** Ms since connecting. */
  now(): number {
    return Date.now() - this.connectedAt;
  }

  /** Whether the agent's audio is playing now. */
  get playing(): boolean {
    return this.queuedSamples > 0 && !this.paused;
  }

  send(message: object): void {
    this.socket.send(JSON.stringify(message));
  }

  close(): void {
    clearInterval(this.tick);
    this.socket.close(1000, 'bye');
  }

  private start(): void {
    this.startedAt = Date.now();
    const frameMs = (this.frameSamples / this.rate) * 1000;
    // paced on the wall clock: each tick sends the frames that are due, so timer drift does not slow it
    this.tick = setInterval(() => {
      const due = Math.floor((Date.now() - this.startedAt) / frameMs);
      while (this.frames < due) {
        this.frames++;
        this.sendFrame();
        this.play(this.frameSamples);
      }
    }, frameMs / 2);
  }

  private sendFrame(): void {
    const frame = new Int16Array(this.frameSamples);
    let filled = 0;
    while (filled < frame.length && this.mic.length > 0) {
      const head = this.mic[0]!;
      const take = Math.min(head.length, frame.length - filled);
      frame.set(head.subarray(0, take), filled);
      filled += take;
      if (take === head.length) this.mic.shift();
      else this.mic[0] = head.subarray(take);
    }
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(frame);
  }

  private received(pcm: Int16Array): void {
    this.segment ??= { audibleAt: undefined, startedAt: this.now(), playedMs: 0, interrupted: false };
    this.queue.push(pcm);
    this.queuedSamples += pcm.length;
  }

  /** Plays `samples` of the queue (real time), reporting a flushed segment once it has played out. */
  private play(samples: number): void {
    if (this.paused) return;
    let left = samples;
    while (left > 0 && this.queue.length > 0) {
      const head = this.queue[0]!;
      const take = Math.min(head.length, left);
      const seg = this.segment!;
      if (seg.audibleAt === undefined && head.subarray(0, take).some((v) => v >= AUDIBLE || v <= -AUDIBLE))
        seg.audibleAt = this.now();
      seg.playedMs += (take / this.rate) * 1000;
      left -= take;
      this.queuedSamples -= take;
      if (take === head.length) this.queue.shift();
      else this.queue[0] = head.subarray(take);
    }
    if (this.queuedSamples === 0 && this.flushPending) this.finish(false);
  }

  private finish(interrupted: boolean): void {
    const seg = this.segment;
    this.flushPending = false;
    this.segment = undefined;
    if (!seg) return;
    seg.interrupted = interrupted;
    this.segments.push(seg);
    this.send({ type: 'playback_finished', playedMs: Math.round(seg.playedMs), interrupted });
  }

  private control(type: string): void {
    this.controls.push(type);
    if (type === 'playback_flush') {
      if (this.segment) this.flushPending = true;
    } else if (type === 'playback_clear') {
      this.queue = [];
      this.queuedSamples = 0;
      this.finish(true);
    } else if (type === 'playback_pause') this.paused = true;
    else if (type === 'playback_resume') this.paused = false;
  }
}
