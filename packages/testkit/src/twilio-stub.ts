import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import { WebSocket } from 'ws';
import { listenOnLoopback } from './ports.js';

/**
 * Twilio, as a phone call reaches a voice app through it: the signed voice webhook (form-encoded, signed as
 * twilio.com/docs/usage/security says) and a bidirectional Media Stream speaking Twilio's protocol exactly
 * (`connected`, `start`, `media` as base64 μ-law 20 ms chunks paced on the wall clock, `mark` echoed when the
 * audio before it has played on this caller's own clock, `dtmf`, `stop`; `media`, `mark`, `clear` in).
 * Its μ-law codec is its own (G.711's reference algorithm), not the service's.
 */

/** Twilio's signature: base64 HMAC-SHA1 over the URL and the sorted parameters' names and values. */
export function signTwilio(authToken: string, url: string, params: Record<string, string> = {}): string {
  const data = Object.keys(params)
    .sort()
    .map((k) => k + params[k])
    .join('');
  return createHmac('sha1', authToken)
    .update(url + data)
    .digest('base64');
}

/** POSTs a webhook as Twilio does: form-encoded, `X-Twilio-Signature` over `signedUrl` (default: `url`). */
export async function postTwilioWebhook(
  url: string,
  authToken: string | undefined,
  params: Record<string, string>,
  signedUrl = url,
): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (authToken !== undefined) headers['x-twilio-signature'] = signTwilio(authToken, signedUrl, params);
  const res = await fetch(url, { method: 'POST', headers, body: new URLSearchParams(params).toString() });
  return { status: res.status, body: await res.text() };
}

/** The Stream URL and parameters of a `<Connect><Stream>` TwiML answer (undefined: it is not one). */
export function streamOf(twiml: string): { url: string; parameters: Record<string, string> } | undefined {
  const unescape = (s: string) =>
    s
      .replace(/&quot;/g, '"')
      .replace(/&apos;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&');
  const url = /<Stream url="([^"]*)"/.exec(twiml)?.[1];
  if (url === undefined) return undefined;
  const parameters: Record<string, string> = {};
  for (const m of twiml.matchAll(/<Parameter name="([^"]*)" value="([^"]*)"\/>/g))
    parameters[unescape(m[1]!)] = unescape(m[2]!);
  return { url: unescape(url), parameters };
}

function ulawOf(sample: number): number {
  const BIAS = 0x84;
  let s = sample;
  const sign = s < 0 ? 0x80 : 0;
  if (sign) s = -s;
  s = Math.min(s, 32635) + BIAS;
  let exponent = 7;
  while (exponent > 0 && (s & (0x80 << exponent)) === 0) exponent--;
  return ~(sign | (exponent << 4) | ((s >> (exponent + 3)) & 0x0f)) & 0xff;
}

function linearOf(ulaw: number): number {
  const u = ~ulaw & 0xff;
  const exponent = (u >> 4) & 7;
  const magnitude = ((((u & 0x0f) << 3) + 0x84) << exponent) - 0x84;
  return u & 0x80 ? -magnitude : magnitude;
}

export const toMulaw = (pcm: Int16Array) => Uint8Array.from(pcm, ulawOf);
export const fromMulaw = (ulaw: Uint8Array) => Int16Array.from(ulaw, linearOf);

/** What the caller heard of one stretch of the agent's audio between marks (or a clear). */
export interface HeardSegment {
  /** Ms since `start` when its first audible sample played. */
  audibleAt: number | undefined;
  /**
   * Ms since `start` when its first audible sample arrived on the stream: what the service sent back, before
   * this stub's playout (a 20 ms tick, as Twilio plays a call's audio out of its own buffer).
   */
  sentAt: number | undefined;
  playedMs: number;
  /** It ended with a `clear`, not a mark. */
  cleared: boolean;
}

const AUDIBLE = 330;

/**
 * One phone caller on a Media Stream: what it says is queued with `say()` (8 kHz PCM) and streamed in real time,
 * silence between; what the agent sends plays in real time from a buffer, marks answered as they are reached.
 */
export class TwilioCaller {
  readonly socket: WebSocket;
  readonly streamSid = `MZ${Math.random().toString(16).slice(2).padEnd(32, '0').slice(0, 32)}`;
  readonly callSid: string;
  /** Every message received, in order (media payloads left out). */
  readonly received: { event: string; [k: string]: unknown }[] = [];
  readonly segments: HeardSegment[] = [];
  readonly marksAnswered: string[] = [];
  opened: Promise<void>;
  closed: Promise<{ code: number; reason: string }>;
  private startedAt = 0;
  private tick: NodeJS.Timeout | undefined;
  private frames = 0;
  private seq = 0;
  private mic: Int16Array[] = [];
  /** The agent's audio and marks, in the order sent: played frame by frame. */
  private playback: (Uint8Array | string)[] = [];
  private segment: HeardSegment | undefined;
  /** When the first audible sample of the segment now arriving came (its mark not yet received). */
  private arriving: number | undefined;
  /** The same for each segment whose mark came but has not played yet, in order. */
  private arrivals: (number | undefined)[] = [];

  constructor(opts: {
    url: string;
    authToken: string;
    callSid: string;
    parameters: Record<string, string>;
    /** A signature over another URL (a forged upgrade), or none. */
    signature?: string | null;
    /** Send start's media format as this instead (a refused one). */
    mediaFormat?: Record<string, unknown>;
  }) {
    this.callSid = opts.callSid;
    const signature = opts.signature === undefined ? signTwilio(opts.authToken, opts.url) : opts.signature;
    this.socket = new WebSocket(opts.url, {
      headers: signature === null ? {} : { 'x-twilio-signature': signature },
    });
    this.closed = new Promise((resolve) =>
      this.socket.on('close', (code, reason) => {
        clearInterval(this.tick);
        resolve({ code, reason: reason.toString() });
      }),
    );
    this.opened = new Promise((resolve, reject) => {
      this.socket.on('unexpected-response', (req, res) => {
        reject(new Error(`refused: ${res.statusCode}`));
        req.destroy();
      });
      this.socket.on('error', reject);
      this.socket.on('open', () => {
        this.sendJson({ event: 'connected', protocol: 'Call', version: '1.0.0' });
        this.sendJson({
          event: 'start',
          sequenceNumber: String(++this.seq),
          streamSid: this.streamSid,
          start: {
            accountSid: 'AC00000000000000000000000000000000',
            streamSid: this.streamSid,
            callSid: opts.callSid,
            tracks: ['inbound'],
            customParameters: opts.parameters,
            mediaFormat: opts.mediaFormat ?? { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
          },
        });
        this.startedAt = Date.now();
        this.tick = setInterval(() => this.onTick(), 10);
        resolve();
      });
    });
    this.socket.on('message', (data: Buffer) => this.onMessage(JSON.parse(data.toString('utf8'))));
  }

  /** Queues speech (8 kHz 16-bit PCM) into the caller's microphone. */
  say(pcm: Int16Array): void {
    this.mic.push(pcm);
  }

  get micQueuedMs(): number {
    return this.mic.reduce((n, p) => n + p.length, 0) / 8;
  }

  /** Whether the agent's audio is playing now. */
  get playing(): boolean {
    return this.playback.some((p) => typeof p !== 'string');
  }

  /**
   * Ms of the stream the caller has sent (where the next frame starts): said speech starts here, so its end in
   * the stream is known to the sample, not to a tick that may run late.
   */
  get streamMs(): number {
    return this.frames * 20;
  }

  now(): number {
    return Date.now() - this.startedAt;
  }

  dtmf(digit: string): void {
    this.sendJson({
      event: 'dtmf',
      streamSid: this.streamSid,
      sequenceNumber: String(++this.seq),
      dtmf: { track: 'inbound_track', digit },
    });
  }

  /** The caller hangs up: Twilio sends `stop` and closes. */
  hangUp(): void {
    this.sendJson({
      event: 'stop',
      sequenceNumber: String(++this.seq),
      streamSid: this.streamSid,
      stop: { accountSid: 'AC00000000000000000000000000000000', callSid: this.callSid },
    });
    clearInterval(this.tick);
    this.socket.close(1000);
  }

  /** Sends raw media (a test of a misbehaving peer): `ms` of silence in one message, now. */
  burst(ms: number): void {
    this.sendMedia(new Uint8Array(ms * 8).fill(0xff));
  }

  sendRaw(text: string): void {
    this.socket.send(text);
  }

  private sendJson(m: object): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(m));
  }

  private sendMedia(ulaw: Uint8Array): void {
    this.sendJson({
      event: 'media',
      sequenceNumber: String(++this.seq),
      streamSid: this.streamSid,
      media: {
        track: 'inbound',
        chunk: String(this.frames),
        timestamp: String(this.frames * 20),
        payload: Buffer.from(ulaw).toString('base64'),
      },
    });
  }

  /** Every 20 ms of wall clock: one frame of the microphone out, 20 ms of the agent's audio played. */
  private onTick(): void {
    const due = Math.floor((Date.now() - this.startedAt) / 20);
    while (this.frames < due) {
      this.frames++;
      const frame = new Int16Array(160);
      let filled = 0;
      while (filled < 160 && this.mic.length > 0) {
        const head = this.mic[0]!;
        const take = Math.min(head.length, 160 - filled);
        frame.set(head.subarray(0, take), filled);
        filled += take;
        if (take === head.length) this.mic.shift();
        else this.mic[0] = head.subarray(take);
      }
      this.sendMedia(toMulaw(frame));
      this.play(160);
    }
  }

  private play(samples: number): void {
    let left = samples;
    while (this.playback.length > 0) {
      const head = this.playback[0]!;
      if (typeof head === 'string') {
        // a mark is reached: everything before it has played
        this.playback.shift();
        this.marksAnswered.push(head);
        this.sendJson({
          event: 'mark',
          streamSid: this.streamSid,
          sequenceNumber: String(++this.seq),
          mark: { name: head },
        });
        const sentAt = this.arrivals.shift();
        if (this.segment) this.segments.push({ ...this.segment, sentAt });
        this.segment = undefined;
        continue;
      }
      if (left === 0) break;
      const take = Math.min(head.length, left);
      const seg = (this.segment ??= {
        audibleAt: undefined,
        sentAt: undefined,
        playedMs: 0,
        cleared: false,
      });
      if (
        seg.audibleAt === undefined &&
        fromMulaw(head.subarray(0, take)).some((v) => Math.abs(v) >= AUDIBLE)
      )
        seg.audibleAt = this.now();
      seg.playedMs += take / 8;
      left -= take;
      if (take === head.length) this.playback.shift();
      else this.playback[0] = head.subarray(take);
    }
  }

  private onMessage(m: { event: string; media?: { payload: string }; mark?: { name: string } }): void {
    if (m.event === 'media') {
      const ulaw = new Uint8Array(Buffer.from(m.media!.payload, 'base64'));
      if (this.arriving === undefined && fromMulaw(ulaw).some((v) => Math.abs(v) >= AUDIBLE))
        this.arriving = this.now();
      this.playback.push(ulaw);
      return;
    }
    this.received.push(m);
    if (m.event === 'mark') {
      this.playback.push(m.mark!.name);
      this.arrivals.push(this.arriving);
      this.arriving = undefined;
    } else if (m.event === 'clear') {
      // Twilio empties its buffer and returns the marks that were pending in it
      const marks = this.playback.filter((p): p is string => typeof p === 'string');
      this.playback = [];
      const sentAt = this.arrivals[0] ?? this.arriving;
      this.arrivals = [];
      this.arriving = undefined;
      if (this.segment) this.segments.push({ ...this.segment, sentAt, cleared: true });
      this.segment = undefined;
      for (const name of marks) this.sendJson({ event: 'mark', streamSid: this.streamSid, mark: { name } });
    }
  }
}

/** One request Twilio's REST API got: its path, basic auth (account SID and token) and form. */
export interface TwilioRestRequest {
  method: string;
  path: string;
  /** The basic auth's user and password, decoded (undefined: none sent). */
  auth: { user: string; password: string } | undefined;
  form: Record<string, string>;
}

/**
 * Twilio's REST API for a call update (`POST /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json`, form
 * `Twiml=…`, basic auth): answers as Twilio does (200 and the call's JSON; 401 without the account's auth;
 * `failWith` answers a status instead), and tells `onCallUpdate` so a test's stream can end as Twilio ends it.
 */
export async function startTwilioRestStub(opts: {
  accountSid: string;
  authToken: string;
  onCallUpdate?: (callSid: string, twiml: string) => void;
}) {
  const requests: TwilioRestRequest[] = [];
  let failStatus: number | undefined;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const header = req.headers.authorization;
      const decoded = header?.startsWith('Basic ')
        ? Buffer.from(header.slice(6), 'base64').toString('utf8')
        : undefined;
      const colon = decoded?.indexOf(':') ?? -1;
      const auth =
        decoded !== undefined && colon >= 0
          ? { user: decoded.slice(0, colon), password: decoded.slice(colon + 1) }
          : undefined;
      const form = Object.fromEntries(new URLSearchParams(body));
      const path = req.url ?? '/';
      requests.push({ method: req.method ?? '', path, auth, form });
      const json = (status: number, value: object) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      const m = /^\/2010-04-01\/Accounts\/([^/]+)\/Calls\/([^/]+)\.json$/.exec(path);
      if (req.method !== 'POST' || !m)
        return json(404, { code: 20404, message: 'The requested resource was not found' });
      if (auth?.user !== opts.accountSid || auth.password !== opts.authToken || m[1] !== opts.accountSid)
        return json(401, { code: 20003, message: 'Authenticate' });
      if (failStatus !== undefined)
        return json(failStatus, { code: 20500, message: 'Internal Server Error' });
      json(200, { sid: m[2], account_sid: m[1], status: 'in-progress' });
      opts.onCallUpdate?.(m[2]!, form.Twiml ?? '');
    });
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    /** Answer every call update with this status from now on (undefined: succeed again). */
    failWith(status: number | undefined) {
      failStatus = status;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
