import { voice } from '@livekit/agents';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { headers as natsHeaders } from '@nats-io/transport-node';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { isNoResponders, safeError } from '@vab/bus';
import {
  AppError,
  VOICE_CONTROL_HEADER,
  VoiceAttachRequest,
  PhoneTransferAnswer,
  VoiceClientMessage,
  voiceInSubject,
  voiceOutSubject,
  voiceRelaySubject,
  type ApiKeys,
  type Flow,
  type Ok,
  type VoiceAudioFormat,
  type StartVoiceSessionBody,
  type VoiceAttached,
  type VoiceServerMessage,
  type VoiceSessionStarted,
} from '@vab/contracts';
import type { SessionContext } from '../sessions/session-context.js';
import type { RunnableFlow } from '../models/model-factory.js';
import type { ConversationKit } from '../conversation/conversation-kit.js';
import type { TransportDeps } from './transport-deps.js';
import { sessionRedactor } from '../sessions/redactor.js';
import { flowToRun } from '../conversation/flow-to-run.js';
import { VoicePipeline } from '../voice/voice-pipeline.js';
import { BusAudioInput, BusAudioOutput } from '../voice/bus-audio.js';
import type { NumberTransfer } from '../conversation/conversation.js';

export interface VoiceSocketConfig {
  BUS_TIMEOUT_MS: number;
  /** A started voice session whose client has not opened the audio socket within this is ended. */
  VOICE_CONNECT_TIMEOUT_MS: number;
  /** No audio from the client for this long: it is gone, and the session ends. */
  VOICE_INPUT_IDLE_MS: number;
  /** A client whose relay (gateway) is gone may resume within this; then the session ends `gateway_lost`. */
  VOICE_RESUME_WINDOW_MS: number;
  /** How often the owner asks the relay whether it is there. */
  VOICE_RELAY_CHECK_MS: number;
  /** How long the agent waits for the client's playback report beyond the audio's own length. */
  VOICE_PLAYBACK_ACK_GRACE_MS: number;
  /** What the agent says before a drain ends its session, when the flow sets none. */
  DRAIN_GOODBYE: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * Voice sessions without a media server: the flow's agent on LiveKit's pipeline (VAD, STT, end of turn, LLM,
 * TTS, interruptions) with the audio of a WebSocket client, which the gateway relays over the bus
 * (`voice.<id>.in` / `voice.<id>.out`, NATS core subjects of the instance that owns the session). Started,
 * capped, timed, checked and recorded as a test session of type "voice" exactly like every other session.
 */
export class VoiceSocketTransport {
  constructor(private readonly deps: TransportDeps & { nc: NatsConnection; config: VoiceSocketConfig }) {}

  async start(agentId: string, body: StartVoiceSessionBody, requestId: string): Promise<VoiceSessionStarted> {
    const { flow, version } = await flowToRun(this.deps.bus, agentId, body, {
      timeoutMs: this.deps.config.BUS_TIMEOUT_MS,
      requestId,
    });
    const hosted = await this.host({
      agentId,
      flow,
      version,
      apiKeys: body.apiKeys ?? undefined,
      audio: body.audio,
      record: body.record,
      requestId,
    });
    const { sessionId, audio, connectWithinMs } = hosted;
    return {
      sessionId,
      audioPath: `/api/agents/${agentId}/voice-sessions/${sessionId}/audio`,
      audio,
      connectWithinMs,
    };
  }

  /**
   * Hosts one voice session on the bus audio (`voice.<id>.in|out`), whoever relays it: a playground voice
   * session, or a call of a live deploy (`call`: recorded as that call, its id the session's).
   */
  async host(opts: HostOptions): Promise<Omit<VoiceSessionStarted, 'audioPath'> & { call: HostedCall }> {
    const { config, models } = this.deps;
    const { agentId, flow, version, apiKeys, requestId } = opts;
    const env = await this.deps.env();
    const runnable = models.require(flow, 'voice', env, apiKeys);
    const { sampleRate, frameMs } = opts.audio;
    const frameBytes = ((sampleRate * frameMs) / 1000) * 2;
    let hostedCall: HostedCall | undefined;
    const { sessionId } = await this.deps.sessions.open(
      {
        sessionType: 'voice',
        agentId,
        version,
        requestId,
        failure: 'the voice session could not start',
        // the exact keys in play, out of every text that leaves the session
        redactor: sessionRedactor(env, apiKeys),
        recordAudio: opts.record,
        ...(opts.callId ? { sessionId: opts.callId, call: { callId: opts.callId } } : {}),
      },
      async (ctx) => {
        const call = new VoiceCall({
          ...this.deps,
          ctx,
          flow: runnable,
          agentId,
          apiKeys,
          sampleRate,
          frameBytes,
          requestId,
          phone: opts.phone === true,
        });
        ctx.answerOwner('attach', VoiceAttachRequest, async (req) => call.attach(req));
        ctx.onStop(() => call.close());
        ctx.onDrain(() => call.sayGoodbye(runnable.config.agent.drainGoodbye || config.DRAIN_GOODBYE));
        ctx.stopAfter(config.VOICE_CONNECT_TIMEOUT_MS, 'client never connected');
        hostedCall = {
          ctx,
          endAfter: (ms, goodbye, reason) => {
            const timer = setTimeout(() => call.endWith(goodbye, reason), ms);
            timer.unref();
            ctx.onStop(async () => clearTimeout(timer));
          },
          endWhenSilent: (ms, goodbye, reason) => call.endWhenSilent(ms, goodbye, reason),
        };
        return { result: undefined };
      },
    );
    if (!hostedCall) throw new Error('the session started without its call');
    return {
      sessionId,
      audio: { sampleRate, frameMs, frameBytes },
      connectWithinMs: config.VOICE_CONNECT_TIMEOUT_MS,
      call: hostedCall,
    };
  }

  /** Idempotent: an unknown or already ended session answers ok. `reason`: why, when not a DELETE. */
  async end(agentId: string, sessionId: string, requestId: string, reason?: string): Promise<Ok> {
    await this.deps.sessions.end(sessionId, agentId, requestId, reason);
    return { ok: true };
  }
}

export interface HostOptions {
  agentId: string;
  flow: Flow;
  /** The agent version it runs; null for a draft flow. */
  version: number | null;
  apiKeys: ApiKeys | undefined;
  audio: VoiceAudioFormat;
  record?: boolean | undefined;
  requestId: string;
  /** A call of a live deploy (admitted already): the session's id, and recorded as that call. */
  callId?: string | undefined;
  /** A phone call: its edge (the telephony service) can hand it to a number (a transfer step's `targetNumber`). */
  phone?: boolean | undefined;
}

/** What a host may do with a session it started. */
export interface HostedCall {
  ctx: SessionContext;
  /** After `ms`, the agent says `goodbye` and the session stops with `reason` (a call's maximum duration). */
  endAfter(ms: number, goodbye: string, reason: string): void;
  /**
   * Once nobody has spoken (neither the caller nor the agent) for `ms` since the client attached, the agent
   * says `goodbye` and the session stops with `reason` (a call's silence timeout).
   */
  endWhenSilent(ms: number, goodbye: string, reason: string): void;
}

interface CallDeps {
  nc: NatsConnection;
  kit: ConversationKit;
  config: VoiceSocketConfig;
  ctx: SessionContext;
  flow: RunnableFlow;
  agentId: string;
  apiKeys: ApiKeys | undefined;
  sampleRate: number;
  frameBytes: number;
  requestId: string;
  phone: boolean;
}

/** Bound on the phone edge handing a call over (its REST call to Twilio is bounded at 10 s). */
const TRANSFER_TIMEOUT_MS = 15_000;

/** One voice session's audio, pipeline and figures, once its client attached. */
class VoiceCall {
  private connectionId: string | undefined;
  private sub: Subscription | undefined;
  private input: BusAudioInput | undefined;
  private output: BusAudioOutput | undefined;
  private pipeline: VoicePipeline | undefined;
  private lastInputAt = Date.now();
  private idleCheck: NodeJS.Timeout | undefined;
  /** A call's silence timeout, once set (`endWhenSilent`); watched from the attach. */
  private silence: { ms: number; goodbye: string; reason: string } | undefined;
  private silenceCheck: NodeJS.Timeout | undefined;
  private ending = false;
  private closed = false;
  private readonly controlHeaders = natsHeaders();
  /**
   * Signs this session's resume tokens: the owner alone issues and checks them, so no secret is shared with
   * the gateways, and a token dies with the instance that made it (as its session does).
   */
  private readonly resumeKey = randomBytes(32);
  /** Which attach the current token belongs to: each `ready` carries a new one, the last one alone resumes. */
  private generation = 0;
  private relayCheck: NodeJS.Timeout | undefined;
  private relayMisses = 0;
  /** The relay is gone: the session waits for a resume (silence meanwhile), up to the resume window. */
  private detached = false;

  constructor(private readonly deps: CallDeps) {
    this.controlHeaders.set(VOICE_CONTROL_HEADER, '1');
  }

  /**
   * The gateway's socket takes the session: one client at a time, on its own agent's path only; or a client
   * whose socket dropped takes it back with its resume token, through any gateway.
   */
  async attach({ agentId, connectionId, resume, relay }: VoiceAttachRequest): Promise<VoiceAttached> {
    const { ctx } = this.deps;
    // another agent's id with this session's: as for any session that does not exist (nothing says it does)
    if (agentId !== this.deps.agentId)
      throw new AppError('NOT_FOUND', 'no voice session with this id is running');
    if (this.closed) throw new AppError('NOT_FOUND', 'the voice session has ended');
    if (resume !== undefined) return this.resume(resume, connectionId);
    if (this.connectionId !== undefined) {
      throw new AppError('CONFLICT', 'another client is connected to this voice session');
    }
    this.connectionId = connectionId;
    ctx.cancelStop();
    try {
      await this.startPipeline();
    } catch (err) {
      // nothing half-started is left: the session ends with its client told why (the error answer)
      ctx.stop('voice pipeline failed');
      throw err;
    }
    // a relay that answers its probe (the gateway's): its death leaves the session waiting for a resume
    if (relay) this.watchRelay();
    this.sendReady();
    return { sampleRate: this.deps.sampleRate, frameBytes: this.deps.frameBytes };
  }

  /** A dropped client's socket, on whichever gateway: the session goes on with it, from where it is now. */
  private resume(token: string, connectionId: string): VoiceAttached {
    const { ctx } = this.deps;
    // only a session that has had a client has a token; the last one issued alone is good
    if (this.connectionId === undefined || !this.tokenValid(token))
      throw new AppError('UNAUTHORIZED', 'not a resume token of this voice session (or not its latest)');
    this.connectionId = connectionId;
    this.detached = false;
    if (this.relayCheck === undefined) this.watchRelay();
    this.relayMisses = 0;
    ctx.cancelStop();
    // its silence is counted from now, not from when its gateway died
    this.lastInputAt = Date.now();
    ctx.log.info({ sessionId: ctx.sessionId }, 'voice client resumed');
    this.sendReady();
    return {
      sampleRate: this.deps.sampleRate,
      frameBytes: this.deps.frameBytes,
      lastEventId: ctx.lastEventId(),
    };
  }

  private sendReady(): void {
    this.generation++;
    this.send({
      type: 'ready',
      sessionId: this.deps.ctx.sessionId,
      sampleRate: this.deps.sampleRate,
      frameBytes: this.deps.frameBytes,
      resumeToken: this.token(this.generation),
      resumeWithinMs: this.deps.config.VOICE_RESUME_WINDOW_MS,
    });
  }

  private signature(generation: number): Buffer {
    const { agentId, ctx } = this.deps;
    return createHmac('sha256', this.resumeKey)
      .update(`vab-voice-resume\n${agentId}\n${ctx.sessionId}\n${generation}`)
      .digest();
  }

  private token(generation: number): string {
    return `r1.${this.deps.agentId}.${generation}.${this.signature(generation).toString('base64url')}`;
  }

  private tokenValid(token: string): boolean {
    const [, agentId, generation, mac] = token.split('.');
    if (agentId !== this.deps.agentId || Number(generation) !== this.generation || !mac) return false;
    const presented = Buffer.from(mac, 'base64url');
    const expected = this.signature(this.generation);
    return presented.length === expected.length && timingSafeEqual(presented, expected);
  }

  /**
   * A gateway that dies (kill -9, a lost machine) says nothing: the owner asks the relay's own subject, often.
   * NATS answers "no responders" at once when no one holds it; a timeout proves nothing (a busy gateway);
   * two misses in a row detach the client: the session waits, silent, for a resume within the window.
   */
  private watchRelay(): void {
    const { nc, config, ctx } = this.deps;
    this.relayCheck = setInterval(() => {
      const connectionId = this.connectionId;
      if (this.detached || connectionId === undefined || this.closed) return;
      nc.request(voiceRelaySubject(connectionId), undefined, { timeout: config.VOICE_RELAY_CHECK_MS }).then(
        () => {
          if (this.connectionId === connectionId) this.relayMisses = 0;
        },
        (err: unknown) => {
          // a resume meanwhile: the probe was of the relay before it
          if (!isNoResponders(err) || this.connectionId !== connectionId || this.detached) return;
          if (++this.relayMisses < 2) return;
          this.detached = true;
          ctx.log.info(
            { sessionId: ctx.sessionId, resumeWithinMs: config.VOICE_RESUME_WINDOW_MS },
            'voice client detached: its gateway is gone',
          );
          ctx.stopAfter(config.VOICE_RESUME_WINDOW_MS, 'gateway_lost');
        },
      );
    }, config.VOICE_RELAY_CHECK_MS);
    this.relayCheck.unref();
  }

  private async startPipeline(): Promise<void> {
    const { nc, ctx, flow, sampleRate, config } = this.deps;
    const input = new BusAudioInput(sampleRate);
    this.input = input;
    this.sub = nc.subscribe(voiceInSubject(ctx.sessionId), { callback: (_e, msg) => this.heard(msg) });
    // the client's silence is counted from its attach, not from the session's start
    this.lastInputAt = Date.now();
    this.idleCheck = setInterval(
      () => {
        // a detached client sends nothing until it resumes: the resume window bounds that wait, not this
        if (!this.detached && Date.now() - this.lastInputAt > config.VOICE_INPUT_IDLE_MS)
          ctx.stop('client gone');
      },
      Math.min(1000, config.VOICE_INPUT_IDLE_MS),
    );
    this.idleCheck.unref();
    this.pipeline = new VoicePipeline({
      kit: this.deps.kit,
      ctx,
      flow,
      apiKeys: this.deps.apiKeys ?? undefined,
      requestId: this.deps.requestId,
      input,
      phone: this.deps.phone,
      transferToNumber: (targetNumber) => this.transferToNumber(targetNumber),
      output: (hooks) => {
        this.output = new BusAudioOutput({
          sampleRate,
          send: (m) => this.send(m),
          replyText: hooks.replyText,
          onAudible: hooks.onAudible,
          ackGraceMs: config.VOICE_PLAYBACK_ACK_GRACE_MS,
        });
        return this.output;
      },
    });
    this.watchSilence();
    await this.pipeline.start();
  }

  /** The agent says `goodbye` (none when empty), then the session stops with `reason`. Once. */
  endWith(goodbye: string, reason: string): void {
    if (this.ending) return;
    this.ending = true;
    clearInterval(this.silenceCheck);
    const said = goodbye.trim() === '' ? Promise.resolve() : this.sayGoodbye(goodbye);
    void said.catch(() => undefined).finally(() => this.deps.ctx.stop(reason));
  }

  endWhenSilent(ms: number, goodbye: string, reason: string): void {
    this.silence = { ms, goodbye, reason };
    this.watchSilence();
  }

  /**
   * A call's silence timeout: silent while the caller is not speaking (LiveKit's VAD) and the agent neither
   * speaks nor prepares a reply (`thinking`: a slow model is no silence of the call's). Checked a few times
   * per timeout, at most every second.
   */
  private watchSilence(): void {
    const silence = this.silence;
    const session = this.pipeline?.session;
    if (!silence || !session || this.silenceCheck) return;
    let callerSpeaking = false;
    let agentBusy = false;
    let quietSince: number | undefined = Date.now();
    const changed = () => {
      if (callerSpeaking || agentBusy) quietSince = undefined;
      else quietSince ??= Date.now();
    };
    session.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      callerSpeaking = ev.newState === 'speaking';
      changed();
    });
    session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => {
      agentBusy = ev.newState === 'speaking' || ev.newState === 'thinking';
      changed();
    });
    this.silenceCheck = setInterval(
      () => {
        // waiting for a resume (its gateway died): that silence is the network's, not the call's
        if (this.detached && quietSince !== undefined) quietSince = Date.now();
        if (quietSince !== undefined && Date.now() - quietSince >= silence.ms)
          this.endWith(silence.goodbye, silence.reason);
      },
      Math.min(1000, Math.ceil(silence.ms / 4)),
    );
    this.silenceCheck.unref();
  }

  /**
   * A message from the client, relayed by the gateway: its microphone's PCM, or a control message. Only audio
   * tells that the client is there: control messages alone (a playback report a second) keep no session open.
   */
  private heard(msg: Msg): void {
    if (!msg.headers?.has(VOICE_CONTROL_HEADER)) {
      const { data } = msg;
      if (data.byteLength !== this.deps.frameBytes) return;
      this.lastInputAt = Date.now();
      // a copy: the frame outlives this message's buffer in LiveKit's queues
      const pcm = new Int16Array(data.byteLength / 2);
      new Uint8Array(pcm.buffer).set(data);
      this.input?.push(pcm);
      return;
    }
    let parsed: ReturnType<typeof VoiceClientMessage.safeParse>;
    try {
      parsed = VoiceClientMessage.safeParse(JSON.parse(decoder.decode(msg.data)));
    } catch {
      return;
    }
    if (!parsed.success) return;
    const m = parsed.data;
    if (m.type === 'playback_finished') this.output?.reported(m.playedMs, m.interrupted);
    else if (m.type === 'dtmf') this.pressed(m.digit);
    else this.deps.ctx.stop('client ended');
  }

  /**
   * A key the caller pressed: an event, and a user turn that names it, so the step engine and the model can
   * route on it ("press 1 for reservations") as on anything said. Whatever the agent was saying is cut, as a
   * spoken turn cuts it.
   */
  private pressed(digit: string): void {
    const conversation = this.pipeline?.flowConversation;
    if (!conversation || conversation.ended) return;
    this.deps.ctx.emit({ type: 'dtmf', digit, stepId: conversation.stepId });
    try {
      void this.pipeline!.session.interrupt().await.catch(() => undefined);
    } catch {
      // a speech that may not be interrupted (a goodbye) plays on; the turn waits for it
    }
    void conversation
      .userTurn(`DTMF: ${digit}`)
      .catch((err: unknown) => this.deps.ctx.log.error({ err: safeError(err) }, 'dtmf turn failed'));
  }

  private send(message: VoiceServerMessage | Int16Array): void {
    if (this.closed) return;
    const subject = voiceOutSubject(this.deps.ctx.sessionId);
    if (message instanceof Int16Array) {
      this.deps.nc.publish(subject, new Uint8Array(message.buffer, message.byteOffset, message.byteLength));
    } else {
      this.deps.nc.publish(subject, encoder.encode(JSON.stringify(message)), {
        headers: this.controlHeaders,
      });
    }
  }

  /**
   * A transfer step's number: a phone call's edge hands the call over (Twilio dials the number and the agent's
   * stream ends), and the call ends `transferred` to it. Any other session cannot: `unavailable`.
   */
  private async transferToNumber(targetNumber: string): Promise<NumberTransfer> {
    const { ctx, nc } = this.deps;
    if (!this.deps.phone || this.closed) return { ok: false, reason: 'unavailable' };
    const ask: VoiceServerMessage = { type: 'transfer', targetNumber };
    let answer: PhoneTransferAnswer;
    try {
      const reply = await nc.request(voiceOutSubject(ctx.sessionId), encoder.encode(JSON.stringify(ask)), {
        timeout: TRANSFER_TIMEOUT_MS,
        headers: this.controlHeaders,
      });
      answer = PhoneTransferAnswer.parse(JSON.parse(decoder.decode(reply.data)));
    } catch (err) {
      ctx.log.warn({ code: 'TRANSFER_FAILED', err: safeError(err) }, 'phone edge did not hand the call over');
      return { ok: false, reason: 'error' };
    }
    if (!answer.ok) return { ok: false, reason: answer.reason ?? 'error' };
    ctx.stop('transferred', { transferredTo: targetNumber });
    return { ok: true };
  }

  /** The goodbye before a drain ends the session (nothing when no client ever attached). */
  async sayGoodbye(text: string): Promise<void> {
    if (this.closed) return;
    await this.pipeline?.sayGoodbye(text);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    clearInterval(this.idleCheck);
    clearInterval(this.silenceCheck);
    clearInterval(this.relayCheck);
    this.output?.close();
    await this.pipeline?.close();
    this.closed = true;
    this.sub?.unsubscribe();
    await this.input?.close();
  }
}
