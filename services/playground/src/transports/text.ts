import {
  type ApiKeys,
  type CaseMocks,
  type Ok,
  type SessionType,
  type StartTextSessionBody,
  type TextTurnResult,
  type TurnResult,
} from '@vab/contracts';
import { sessionRedactor } from '../sessions/redactor.js';
import type { UserTurn } from '../sessions/session-context.js';
import type { RunnableFlow } from '../models/model-factory.js';
import type { FlowConversation } from '../conversation/conversation.js';
import type { TransportDeps } from './transport-deps.js';
import { TYPED } from '../conversation/conversation-mode.js';
import { flowToRun } from '../conversation/flow-to-run.js';
import { TypedAgentSession } from '../conversation/typed-session.js';

/**
 * Text test sessions: the flow's conversation on a LiveKit session without a room, turns typed by the
 * builder. Recorded as a test session of type "text" whose id is the session's.
 */
export class TextTransport {
  constructor(private readonly deps: TransportDeps & { busTimeoutMs: number }) {}

  async start(agentId: string, body: StartTextSessionBody, requestId: string): Promise<TextTurnResult> {
    const { models } = this.deps;
    const { flow, version } = await flowToRun(this.deps.bus, agentId, body, {
      timeoutMs: this.deps.busTimeoutMs,
      requestId,
    });
    const runnable = models.require(flow, 'text', await this.deps.env(), body.apiKeys);
    const { sessionId, result } = await this.open(agentId, runnable, {
      sessionType: 'text',
      version,
      apiKeys: body.apiKeys,
      failure: 'the agent could not start',
      requestId,
    });
    return { sessionId, ...result };
  }

  /**
   * A typed conversation on a LiveKit session without a room, hosted here and recorded as a test session of
   * `sessionType`: its id, the greeting's result, and the conversation itself.
   */
  async open(
    agentId: string,
    flow: RunnableFlow,
    opts: {
      sessionType: SessionType;
      /** The stored version it runs; null for a draft. */
      version: number | null;
      apiKeys: ApiKeys | null | undefined;
      failure: string;
      requestId: string;
      mocks?: CaseMocks | undefined;
    },
  ): Promise<{ sessionId: string; result: TurnResult; conversation: FlowConversation }> {
    const { requestId } = opts;
    let conversation: FlowConversation | undefined;
    const redactor = sessionRedactor(await this.deps.env(), opts.apiKeys);
    const { sessionId, result } = await this.deps.sessions.open(
      {
        sessionType: opts.sessionType,
        agentId,
        version: opts.version,
        requestId,
        failure: opts.failure,
        redactor,
      },
      async (ctx) => {
        const session = new TypedAgentSession();
        const conv = await this.deps.kit.converse({
          flow,
          mode: TYPED,
          apiKeys: opts.apiKeys ?? undefined,
          session,
          startSession: (agent) => session.start({ agent }),
          record: (m) => ctx.transcript?.write(m),
          emit: ctx.emit,
          lastEventId: ctx.lastEventId,
          // the end step ends the session, as a voice call ends: record closed, session_ended, slot freed
          onEnded: () => ctx.stop('end step'),
          log: ctx.log,
          requestId,
          mocks: opts.mocks,
        });
        conversation = conv;
        ctx.usageFrom(() => conv.usage());
        ctx.onStop(() => conv.close());
        return { result: await conv.start(), turn: (text) => conv.userTurn(text) };
      },
    );
    return { sessionId, result, conversation: conversation! };
  }

  turn(turn: UserTurn): Promise<TextTurnResult> {
    return this.deps.sessions.turn(turn);
  }

  /** Idempotent: an unknown or already ended session answers ok. */
  async end(agentId: string, sessionId: string, requestId: string): Promise<Ok> {
    await this.deps.sessions.end(sessionId, agentId, requestId);
    return { ok: true };
  }
}
