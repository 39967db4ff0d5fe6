import { voice } from '@livekit/agents';
import type { ApiKeys, CaseMocks, SessionEventInput, SessionMessage, TurnMetrics } from '@vab/contracts';
import type { SessionContext } from '../host/session-host.js';
import type { RunnableFlow } from '../readiness.js';
import type { FlowConversation } from '../runtime/conversation.js';
import type { ConversationKit } from '../runtime/conversations.js';
import { SPOKEN } from '../runtime/conversation-mode.js';
import { spokenTextTransforms } from '../runtime/spoken-text.js';
import { sharedVad, turnHandlingOf } from '../runtime/voice-models.js';

/** What a playback sink needs from the pipeline it plays. */
export interface PlaybackHooks {
  /** The text of the reply being played (for what an interrupted one keeps). */
  replyText(): string | undefined;
  /** The first audible frame of a segment is out (sent, or played) now. */
  onAudible(at: number): void;
}

export interface VoicePipelineOptions {
  kit: ConversationKit;
  ctx: SessionContext;
  flow: RunnableFlow;
  apiKeys: ApiKeys | undefined;
  requestId: string;
  /** The caller's audio: where it comes from (a socket's client, a simulated caller) is the caller's business. */
  input: voice.AudioInput;
  /** Builds the playback sink the agent's audio goes to, given the pipeline's hooks. */
  output(hooks: PlaybackHooks): voice.AudioOutput;
  /** A test case's mocks. */
  mocks?: CaseMocks | undefined;
  /** Sees every event and recorded message of the session too (a test attempt reads its observation so). */
  observe?: {
    event?(event: SessionEventInput): void;
    message?(message: SessionMessage): void;
  };
}

/** The moments of one user turn, on the wall clock, that the audio figures are made from. */
interface TurnMoments {
  speechEndAt?: number;
  transcriptAt?: number;
  committedAt?: number;
  playbackAt?: number;
  audibleAt?: number;
}

/**
 * The flow's voice agent on LiveKit's pipeline (VAD, STT, end of turn, LLM, TTS, interruptions) between an
 * audio source and a playback sink, with the per-turn figures measured from the audio: what a builder's voice
 * session (the WebSocket) and a simulated caller's call (a voice test case) both run, so a test exercises the
 * pipeline users get.
 */
export class VoicePipeline {
  readonly session: voice.AgentSession;
  private conversation: FlowConversation | undefined;
  private turn: TurnMoments = {};
  private closed = false;

  constructor(private readonly opts: VoicePipelineOptions) {
    this.session = new voice.AgentSession({
      vad: sharedVad(),
      turnHandling: turnHandlingOf(opts.flow.config.agent),
      ttsTextTransforms: spokenTextTransforms(opts.ctx.log),
    });
  }

  get flowConversation(): FlowConversation | undefined {
    return this.conversation;
  }

  /** Starts the conversation: the agent greets (in the background, as a voice call does). */
  async start(): Promise<FlowConversation> {
    const { ctx, observe } = this.opts;
    const session = this.session;
    this.watch(session);
    const output = this.opts.output({
      replyText: () => this.conversation?.replyText(),
      onAudible: (at) => (this.turn.audibleAt ??= at),
    });
    output.on(voice.AudioOutput.EVENT_PLAYBACK_STARTED, (ev: { createdAt: number }) => {
      this.turn.playbackAt ??= ev.createdAt;
    });
    await this.connectAudio(session, this.opts.input, output);
    const emit = observe?.event
      ? (e: SessionEventInput) => {
          ctx.emit(e);
          observe.event!(e);
        }
      : ctx.emit;
    const conv = await this.opts.kit.converse({
      mode: SPOKEN,
      session,
      startSession: (agent) => session.start({ agent }),
      flow: this.opts.flow,
      apiKeys: this.opts.apiKeys,
      record: (m) => {
        ctx.recorder?.record(m);
        observe?.message?.(m);
      },
      emit,
      lastEventId: ctx.lastEventId,
      onEnded: () => ctx.stop('end step'),
      log: ctx.log,
      requestId: this.opts.requestId,
      audioFigures: () => this.takeFigures(),
      mocks: this.opts.mocks,
    });
    this.conversation = conv;
    ctx.usageFrom(() => conv.usage());
    await conv.start();
    return conv;
  }

  /**
   * The one place the session's audio input and output are set, and recorded: LiveKit's recorder wraps the
   * audio the session is about to read and play (before the start), so every kind of voice session — a
   * socket's client or a simulated caller — is recorded alike (when recordings are on for it).
   */
  private async connectAudio(
    session: voice.AgentSession,
    input: voice.AudioInput,
    output: voice.AudioOutput,
  ): Promise<void> {
    session.input.audio = input;
    session.output.audio = output;
    await this.opts.ctx.recordAudio(session);
  }

  /** LiveKit's session events the figures and the agent-state events are made of. */
  private watch(session: voice.AgentSession): void {
    const { ctx } = this.opts;
    session.on(voice.AgentSessionEventTypes.AgentStateChanged, (ev) => {
      ctx.emit({ type: 'agent_state', state: ev.newState });
    });
    session.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      if (ev.newState === 'speaking') this.turn = {};
      // the VAD reports the end of speech once its silence has lasted: the speech ended that long before
      else if (ev.oldState === 'speaking') {
        this.turn.speechEndAt = ev.createdAt - sharedVad().minSilenceDuration;
      }
    });
    session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (ev) => {
      if (ev.isFinal) this.turn.transcriptAt = Date.now();
    });
    session.on(voice.AgentSessionEventTypes.ConversationItemAdded, (ev) => {
      if (ev.item.type === 'message' && ev.item.role === 'user') this.turn.committedAt = Date.now();
    });
    session.on(voice.AgentSessionEventTypes.Close, () => ctx.stop('session closed'));
  }

  /** The turn's figures measured here from the audio itself; once per turn. */
  private takeFigures(): Partial<TurnMetrics> {
    const t = this.turn;
    this.turn = {};
    if (t.speechEndAt === undefined) return {};
    const since = (at: number | undefined) =>
      at === undefined ? undefined : Math.max(0, Math.round(at - t.speechEndAt!));
    const figures: Partial<TurnMetrics> = {
      responseMs: since(t.audibleAt),
      e2eLatencyMs: since(t.playbackAt),
      transcriptionDelayMs: since(t.transcriptAt),
      endOfTurnDelayMs: since(t.committedAt),
    };
    return Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined));
  }

  /** Idempotent: the conversation closes (post-processing under way finishes), then the input. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.conversation?.close();
    await this.opts.input.close();
  }
}
