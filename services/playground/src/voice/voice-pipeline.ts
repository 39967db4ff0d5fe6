import { voice } from '@livekit/agents';
import type { ApiKeys, CaseMocks, SessionEventInput, SessionMessage, TurnMetrics } from '@vab/contracts';
import type { SessionContext } from '../sessions/session-context.js';
import type { RunnableFlow } from '../models/model-factory.js';
import type { FlowConversation } from '../conversation/conversation.js';
import type { ConversationKit, TransportSide } from '../conversation/conversation-kit.js';
import { SPOKEN } from '../conversation/conversation-mode.js';
import { spokenTextTransforms } from '../conversation/spoken-text.js';
import { phoneTurnSettings, SessionVad, sharedVad, turnHandlingOf } from '../models/voice-models.js';
import { inSession } from '../observability/telemetry.js';
import type { PlaybackHooks } from './playback.js';

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
  /** A phone call: its turns take the phone's defaults where the agent node names none. */
  phone?: boolean | undefined;
  /** A phone call: hands it to a person at a number (a transfer step's `targetNumber`). */
  transferToNumber?: TransportSide['transferToNumber'];
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
  /** The user's turn being heard. */
  private hearing: TurnMoments = {};
  /** The user's last committed turn that no reply has started playing for yet. */
  private unanswered: TurnMoments | undefined;
  /**
   * The turn the reply now playing (or played last) answers, with its playback's moments: its message takes
   * them. Bound when its playback starts, so a barge-in that comes before the cut reply's message (LiveKit
   * adds it once its playback is settled, and the caller's next turn may have ended by then) does not take
   * them, nor leave the reply to the barge-in without its own.
   */
  private answering: TurnMoments | undefined;
  private closed = false;

  constructor(private readonly opts: VoicePipelineOptions) {
    this.session = new voice.AgentSession({
      vad: sharedVad(),
      turnHandling: turnHandlingOf(
        opts.phone === true ? phoneTurnSettings(opts.flow.config.agent) : opts.flow.config.agent,
      ),
      ttsTextTransforms: spokenTextTransforms(opts.ctx.log),
    });
  }

  get flowConversation(): FlowConversation | undefined {
    return this.conversation;
  }

  /**
   * Starts the conversation: the agent greets (in the background, as a voice call does). LiveKit's tasks made
   * here (its audio recognition, the VAD's stream) inherit the session's context, so its lines name the session
   * and the VAD's lag is the session's (SESSION_MAX_BEHIND_MS): a voice socket's pipeline starts when its client
   * connects, a bus callback outside the context the session was opened in, and every VAD reported as no one's.
   */
  start(): Promise<FlowConversation> {
    return inSession({ sessionId: this.opts.ctx.sessionId }, () => this.startInSession());
  }

  private async startInSession(): Promise<FlowConversation> {
    const { ctx, observe } = this.opts;
    const session = this.session;
    this.watch(session);
    const output = this.opts.output({
      replyText: () => this.conversation?.replyText(),
      onAudible: (at) => {
        if (this.answering) this.answering.audibleAt ??= at;
      },
    });
    output.on(voice.AudioOutput.EVENT_PLAYBACK_STARTED, (ev: { createdAt: number }) =>
      this.replyStarted(ev.createdAt),
    );
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
        ctx.transcript?.write(m);
        observe?.message?.(m);
      },
      emit,
      lastEventId: ctx.lastEventId,
      onEnded: () => ctx.stop('end step'),
      log: ctx.log,
      requestId: this.opts.requestId,
      audioFigures: () => this.takeFigures(),
      mocks: this.opts.mocks,
      transferToNumber: this.opts.transferToNumber,
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
    // a turn may span several stretches of speech (a pause the end-of-turn model held, "Stop. What time…"): its
    // figures count from the last one's end, and its last final transcript, as LiveKit's own do
    session.on(voice.AgentSessionEventTypes.UserStateChanged, (ev) => {
      // the VAD reports the end of speech once its silence has lasted: the speech ended where it dates it (where
      // the sound ended, the moment LiveKit counts the endpointing wait from), or its silence window before
      if (ev.oldState === 'speaking')
        this.hearing.speechEndAt =
          this.vadSpeechEnd(session) ?? ev.createdAt - sharedVad().minSilenceDuration;
    });
    session.on(voice.AgentSessionEventTypes.UserInputTranscribed, (ev) => {
      if (ev.isFinal) this.hearing.transcriptAt = Date.now();
    });
    session.on(voice.AgentSessionEventTypes.ConversationItemAdded, (ev) => {
      if (ev.item.type !== 'message' || ev.item.role !== 'user') return;
      // the turn is over: the next reply to start playing answers it (a later turn's commit supersedes it)
      this.unanswered = { ...this.hearing, committedAt: Date.now() };
      this.hearing = {};
    });
    session.on(voice.AgentSessionEventTypes.Close, () => ctx.stop('session closed'));
  }

  /** The end of speech the agent's VAD dated last, if its END_OF_SPEECH is what changed the user's state. */
  private vadSpeechEnd(session: voice.AgentSession): number | undefined {
    let vad: unknown;
    try {
      vad = session.currentAgent.vad;
    } catch {
      // not running (yet, or any more)
      return undefined;
    }
    return vad instanceof SessionVad ? vad.takeSpeechEnd() : undefined;
  }

  /**
   * A reply's playback started: it answers the last committed turn not answered yet (or, when the flow said
   * something without a committed turn, e.g. a literal answer to a turn the step engine took, the turn just
   * heard). A second reply to the same turn answers none: its figures would count the first one's wait.
   */
  private replyStarted(at: number): void {
    const heard = this.hearing.speechEndAt !== undefined ? this.hearing : undefined;
    const turn = this.unanswered ?? heard;
    this.answering = turn ? { ...turn, playbackAt: at } : undefined;
    this.unanswered = undefined;
    if (turn !== undefined && turn === heard) this.hearing = {};
  }

  /** The figures of the turn the reply just said answers, measured here from the audio itself; once. */
  private takeFigures(): Partial<TurnMetrics> {
    const t = this.answering;
    this.answering = undefined;
    if (t?.speechEndAt === undefined) return {};
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

  /**
   * The agent's last words before its instance's drain ends the call: what it is saying is cut, the goodbye
   * is said (not interruptible: the call ends after it) and played out. The caller of this bounds it.
   */
  async sayGoodbye(text: string): Promise<void> {
    if (this.closed) return;
    const session = this.session;
    await session.interrupt({ force: true }).await.catch(() => undefined);
    await session.say(text, { allowInterruptions: false }).waitForPlayout();
  }

  /** Idempotent: the conversation closes (post-processing under way finishes), then the input. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.conversation?.close();
    await this.opts.input.close();
  }
}
