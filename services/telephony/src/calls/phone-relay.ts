import {
  headers as natsHeaders,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import { isNoResponders, safeError, type BusClient, type Logger } from '@vab/bus';
import {
  AppError,
  liveSubject,
  ownerSubject,
  Subjects,
  type MediaRefusalKind,
  type PhoneTransferAnswer,
  VOICE_CONTROL_HEADER,
  VoiceAttached,
  VoiceCloseCodes,
  voiceInSubject,
  voiceOutSubject,
} from '@vab/contracts';
import { closeSocket } from '@vab/service-kit';
import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import { decodeMulaw, encodeMulaw } from '../audio/mulaw.js';
import { PHONE_AUDIO } from './answer.js';
import type { CallGrant, CallTokens } from './call-tokens.js';
import type { PhoneCalls } from './phone-calls.js';
import type { TwilioRest } from '../twilio/rest.js';
import { isTwilioFormat, TwilioInbound, type TwilioStart } from './twilio-messages.js';

export interface PhoneRelaySettings {
  /** How far ahead of real time the caller's audio may run before the socket is closed. */
  burstMs: number;
  /** How long a socket may take to send `start`. */
  startTimeoutMs: number;
  attachTimeoutMs: number;
  /** How often the session's owner is asked whether the session still runs (none: it ended, hang up). */
  liveProbeMs: number;
}

export const DEFAULT_PHONE_RELAY: PhoneRelaySettings = {
  burstMs: 2000,
  startTimeoutMs: 10_000,
  attachTimeoutMs: 5000,
  liveProbeMs: 1000,
};

/** 20 ms at 8 kHz: Twilio's usual chunk, the agent's audio is sent to the line in. */
const FRAME_SAMPLES = 160;
const FRAME_MS = 20;
/** The caller's audio on the bus: a frame of `PHONE_AUDIO`'s length (40 ms: 640 bytes of 16-bit PCM). */
const IN_FRAME_SAMPLES = (PHONE_AUDIO.sampleRate * PHONE_AUDIO.frameMs) / 1000;
/** How much of the agent's audio is sent ahead of what the line has played: Twilio's jitter buffer, no more. */
const LEAD_MS = 100;

type Queued = { audio: Uint8Array } | { flush: number };

/**
 * One Twilio media socket: Twilio's protocol on one side, the voice protocol over the bus on the other
 * (`voice.<callId>.in|out`, attached at the session's owner like the gateway's voice socket). The caller's
 * μ-law becomes 40 ms PCM frames (`PHONE_AUDIO`); the agent's PCM becomes μ-law sent as the line plays it (a
 * lead of 100 ms), each segment followed by a `mark` whose echo is the playback report; a barge-in
 * (`playback_clear`) sends `clear` at once and reports what had played.
 */
export class PhoneRelay {
  private readonly connectionId = randomUUID().replaceAll('-', '');
  private readonly control = natsHeaders();
  private grant: CallGrant | undefined;
  private streamSid = '';
  private attached = false;
  private closed = false;
  private out: Subscription | undefined;
  private startTimer: NodeJS.Timeout | undefined;
  private pump: NodeJS.Timeout | undefined;
  private probe: NodeJS.Timeout | undefined;
  /** The caller's audio: PCM waiting to fill a frame, and the pace check. */
  private pending = new Int16Array(IN_FRAME_SAMPLES);
  private pendingSamples = 0;
  private firstMediaAt = 0;
  private receivedMs = 0;
  /** The agent's audio: queued μ-law and marks, when the line will have played what was sent, the segment. */
  private queue: Queued[] = [];
  private playedUntil = 0;
  private paused = false;
  private segment: { id: number; sentMs: number } | undefined;
  private segments = 0;
  /** Segments flushed whose mark has not come back: id → ms sent. */
  private marks = new Map<number, number>();
  private endReason = 'caller hung up';
  /** Why this side closed the stream, when it did: the call's `endedDetail` (a builder reads it on the call). */
  private refusal: MediaRefusalKind | undefined;
  /** A transfer to a number under way or made: its stream's stop is not the caller hanging up once it is. */
  private transferring: Promise<PhoneTransferAnswer> | undefined;

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      tokens: CallTokens;
      calls: PhoneCalls;
      twilio: TwilioRest;
      log: Logger;
      socket: WebSocket;
      settings: PhoneRelaySettings;
      requestId: string;
    },
  ) {
    this.control.set(VOICE_CONTROL_HEADER, '1');
  }

  open(): void {
    const { socket, settings } = this.deps;
    socket.on('message', (data: Buffer, isBinary: boolean) =>
      this.guarded(() => this.fromTwilio(data, isBinary)),
    );
    socket.on('close', () => void this.finish());
    socket.on('error', () => void this.finish());
    this.startTimer = setTimeout(
      () => this.close(VoiceCloseCodes.badInput, 'no start message in time'),
      settings.startTimeoutMs,
    );
    this.startTimer.unref();
  }

  private guarded(step: () => void): void {
    try {
      step();
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown): void {
    this.deps.log.error(
      { code: 'PHONE_RELAY_FAILED', requestId: this.deps.requestId, err: safeError(err) },
      'phone relay failed',
    );
    this.close(VoiceCloseCodes.internal, 'the telephony service failed relaying this call');
  }

  private fromTwilio(data: Buffer, isBinary: boolean): void {
    if (this.closed) return;
    let parsed: ReturnType<typeof TwilioInbound.safeParse> | undefined;
    if (!isBinary) {
      try {
        parsed = TwilioInbound.safeParse(JSON.parse(data.toString('utf8')));
      } catch {
        parsed = undefined;
      }
    }
    if (!parsed?.success) {
      this.endReason = 'not a Twilio media stream message';
      this.refusal = 'bad_message';
      this.close(VoiceCloseCodes.badInput, 'not a message of Twilio Media Streams');
      return;
    }
    const m = parsed.data;
    switch (m.event) {
      case 'connected':
        return;
      case 'start':
        if (this.grant || this.streamSid) return this.bad('a second start message');
        void this.start(m).catch((err: unknown) => this.failed(err));
        return;
      case 'media':
        return this.media(m.media.payload);
      case 'mark':
        return this.markPlayed(m.mark.name);
      case 'dtmf':
        return this.dtmf(m.dtmf.digit);
      case 'stop':
        this.endReason = 'caller hung up';
        this.close(VoiceCloseCodes.ended, 'stream stopped');
    }
  }

  private bad(reason: string): void {
    this.endReason = reason;
    this.refusal = 'bad_message';
    this.close(VoiceCloseCodes.badInput, reason);
  }

  private async start(m: TwilioStart): Promise<void> {
    clearTimeout(this.startTimer);
    this.streamSid = m.streamSid;
    if (!isTwilioFormat(m.start.mediaFormat))
      return this.bad('the stream must be audio/x-mulaw at 8000 Hz, mono');
    const token = m.start.customParameters.token;
    const grant = token ? await this.deps.tokens.redeem(token) : false;
    if (this.closed) return;
    if (!grant || grant.callSid !== m.start.callSid) {
      // nothing was attached: no session of anyone's is ended by a forged or replayed token
      this.close(VoiceCloseCodes.unauthorized, 'call token forged, used or expired', false);
      return;
    }
    this.grant = grant;
    await this.attach(grant);
  }

  private async attach(grant: CallGrant): Promise<void> {
    const { nc, bus, settings, requestId } = this.deps;
    // the call is hosted as the voice session of its id
    const { callId: sessionId, agentId } = grant;
    this.out = nc.subscribe(voiceOutSubject(sessionId), {
      callback: (_e, msg) =>
        this.guarded(() => this.fromAgent(msg.data, msg.headers?.has(VOICE_CONTROL_HEADER) ?? false, msg)),
    });
    try {
      VoiceAttached.parse(
        await bus.requestTo(
          ownerSubject(sessionId, 'attach'),
          { agentId, sessionId, connectionId: this.connectionId },
          {
            timeoutMs: settings.attachTimeoutMs,
            requestId,
            onNoResponders: new AppError('NOT_FOUND', 'the call ended before its audio connected'),
          },
        ),
      );
    } catch (err) {
      this.close(
        VoiceCloseCodes.lost,
        err instanceof AppError ? err.message : 'the call could not be reached',
        false,
      );
      return;
    }
    if (this.closed) return void this.endSession();
    this.attached = true;
    this.deps.log.info({ callId: sessionId, callSid: grant.callSid }, 'phone media attached');
    // the status callback tells a call that never connected by this (not waited for: the call goes on)
    void this.deps.calls
      .attached(grant.callSid)
      .catch((err: unknown) =>
        this.deps.log.warn(
          { code: 'REDIS_ERROR', callId: sessionId, err: safeError(err) },
          'phone call not marked attached',
        ),
      );
    this.probe = setInterval(() => void this.probeLive(sessionId), settings.liveProbeMs);
    this.probe.unref();
  }

  /** The caller's μ-law: decoded, cut into frames of `PHONE_AUDIO`, checked against the wall clock. */
  private media(payload: string): void {
    if (!this.attached || !this.grant) return;
    const ulaw = Buffer.from(payload, 'base64');
    const now = Date.now();
    if (this.firstMediaAt === 0) this.firstMediaAt = now;
    this.receivedMs += ulaw.length / 8;
    if (this.receivedMs > now - this.firstMediaAt + this.deps.settings.burstMs) {
      this.endReason = 'audio faster than real time';
      this.refusal = 'media_too_fast';
      this.close(VoiceCloseCodes.tooFast, 'audio faster than real time: send it as it is recorded');
      return;
    }
    const pcm = decodeMulaw(ulaw);
    const subject = voiceInSubject(this.grant.callId);
    let at = 0;
    while (at < pcm.length) {
      const take = Math.min(IN_FRAME_SAMPLES - this.pendingSamples, pcm.length - at);
      this.pending.set(pcm.subarray(at, at + take), this.pendingSamples);
      this.pendingSamples += take;
      at += take;
      if (this.pendingSamples === IN_FRAME_SAMPLES) {
        this.deps.nc.publish(subject, new Uint8Array(this.pending.buffer));
        this.pending = new Int16Array(IN_FRAME_SAMPLES);
        this.pendingSamples = 0;
      }
    }
  }

  private dtmf(digit: string): void {
    if (!this.grant) return;
    this.publishControl({ type: 'dtmf', digit });
  }

  private publishControl(message: object): void {
    if (!this.grant || !this.attached) return;
    this.deps.nc.publish(voiceInSubject(this.grant.callId), JSON.stringify(message), {
      headers: this.control,
    });
  }

  /** What the session's owner sends: the agent's PCM (8 kHz) or a control message of the voice protocol. */
  private fromAgent(data: Uint8Array, control: boolean, msg: Msg): void {
    if (this.closed) return;
    if (!control) {
      const pcm = new Int16Array(data.byteLength >> 1);
      new Uint8Array(pcm.buffer).set(data.subarray(0, pcm.length * 2));
      this.queue.push({ audio: encodeMulaw(pcm) });
      this.pumpSoon();
      return;
    }
    const message = JSON.parse(Buffer.from(data).toString('utf8')) as {
      type?: unknown;
      targetNumber?: unknown;
    };
    const type = message.type;
    if (type === 'transfer' && msg.reply) {
      void this.transfer(String(message.targetNumber), msg);
      return;
    }
    if (type === 'playback_flush') {
      this.queue.push({ flush: 0 });
      this.pumpSoon();
    } else if (type === 'playback_clear') this.clear();
    else if (type === 'playback_pause') this.paused = true;
    else if (type === 'playback_resume') {
      this.paused = false;
      this.pumpSoon();
    }
  }

  private pumpSoon(): void {
    if (this.pump) return;
    this.send();
    if (this.queue.length > 0) {
      this.pump = setInterval(() => this.guarded(() => this.send()), FRAME_MS / 2);
    }
  }

  /** Sends what is due: audio up to the lead ahead of what the line has played, and marks as they are reached. */
  private send(): void {
    const now = Date.now();
    while (this.queue.length > 0 && !this.paused) {
      const head = this.queue[0]!;
      if ('flush' in head) {
        this.queue.shift();
        this.flushSegment();
        continue;
      }
      if (Math.max(this.playedUntil, now) - now >= LEAD_MS) break;
      const chunk = head.audio.subarray(0, FRAME_SAMPLES);
      if (chunk.length === head.audio.length) this.queue.shift();
      else head.audio = head.audio.subarray(FRAME_SAMPLES);
      const ms = chunk.length / 8;
      this.playedUntil = Math.max(this.playedUntil, now) + ms;
      this.segment ??= { id: ++this.segments, sentMs: 0 };
      this.segment.sentMs += ms;
      this.twilio({
        event: 'media',
        streamSid: this.streamSid,
        media: { payload: Buffer.from(chunk).toString('base64') },
      });
    }
    if (this.queue.length === 0 && this.pump) {
      clearInterval(this.pump);
      this.pump = undefined;
    }
  }

  /** The segment's audio is all sent: a mark after it, whose echo says it played. */
  private flushSegment(): void {
    const seg = this.segment;
    this.segment = undefined;
    if (!seg) {
      // an empty segment: nothing to wait for
      this.publishControl({ type: 'playback_finished', playedMs: 0, interrupted: false });
      return;
    }
    this.marks.set(seg.id, seg.sentMs);
    this.twilio({ event: 'mark', streamSid: this.streamSid, mark: { name: `seg-${seg.id}` } });
  }

  private markPlayed(name: string): void {
    const id = Number(/^seg-(\d+)$/.exec(name)?.[1]);
    const sentMs = this.marks.get(id);
    if (sentMs === undefined) return; // a mark Twilio returns after a clear, already reported
    this.marks.delete(id);
    this.publishControl({ type: 'playback_finished', playedMs: Math.round(sentMs), interrupted: false });
  }

  /** A barge-in: Twilio drops what it buffered, and the session hears how much of the segment was played. */
  private clear(): void {
    const now = Date.now();
    const unplayed = Math.max(0, this.playedUntil - now);
    this.queue = [];
    this.playedUntil = now;
    this.twilio({ event: 'clear', streamSid: this.streamSid });
    // a flushed segment whose mark has not come back is cut too: the newest one is what was playing
    const flushed = [...this.marks.entries()];
    this.marks.clear();
    const seg =
      this.segment ??
      (flushed.length > 0 ? { id: flushed.at(-1)![0], sentMs: flushed.at(-1)![1] } : undefined);
    this.segment = undefined;
    if (!seg) return;
    const playedMs = Math.max(0, Math.round(seg.sentMs - unplayed));
    this.publishControl({ type: 'playback_finished', playedMs, interrupted: true });
  }

  /**
   * The flow's transfer step names a number: Twilio's REST API gives the call a `<Dial>` (the stream then
   * stops), and the session is answered whether it did. A call handed over is not hung up when its stream
   * stops: the session ends it `transferred`.
   */
  private async transfer(targetNumber: string, msg: Msg): Promise<void> {
    const grant = this.grant;
    // Twilio may stop the stream before its REST answer arrives: the stream's end waits for this
    this.transferring =
      grant && !this.closed
        ? this.deps.twilio.dial(grant.callSid, targetNumber)
        : Promise.resolve({ ok: false, reason: 'error' });
    const answer = await this.transferring;
    msg.respond(JSON.stringify(answer));
  }

  private twilio(message: object): void {
    const { socket } = this.deps;
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message));
  }

  /** The session ended on its own (an end step, a timeout): the stream closes and Twilio hangs up. */
  private async probeLive(sessionId: string): Promise<void> {
    if (this.closed) return;
    try {
      await this.deps.nc.request(liveSubject(sessionId), undefined, { timeout: 2000 });
    } catch (err) {
      if (isNoResponders(err)) this.close(VoiceCloseCodes.ended, 'call ended', false);
    }
  }

  private close(code: number, reason: string, endSession = true): void {
    if (this.closed) return;
    closeSocket(this.deps.socket, code, reason);
    void this.finish(endSession);
  }

  private async finish(endSession = true): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.startTimer);
    clearInterval(this.pump);
    clearInterval(this.probe);
    try {
      this.out?.unsubscribe();
    } catch (err) {
      this.deps.log.debug({ err: safeError(err) }, 'phone relay released on a closed connection');
    }
    if (endSession) await this.endSession();
  }

  /** The caller's side went (`stop`, a closed or refused socket): the call ends `caller_hung_up`. */
  private async endSession(): Promise<void> {
    if (!this.grant || !this.attached) return;
    // handed over to a number: the session ends the call `transferred`
    if (this.transferring && (await this.transferring).ok) return;
    const { agentId, callId } = this.grant;
    this.deps.log.info({ callId, why: this.endReason }, 'phone stream ended');
    await this.deps.bus
      .request(
        Subjects.callsHangUp,
        {
          agentId,
          callId,
          reason: 'caller_hung_up',
          ...(this.refusal ? { detail: { kind: this.refusal } } : {}),
        },
        { timeoutMs: 10_000, requestId: this.deps.requestId },
      )
      .catch((err: unknown) =>
        this.deps.log.warn({ code: 'VOICE_END_FAILED', callId, err: safeError(err) }, 'phone call not ended'),
      );
  }
}
