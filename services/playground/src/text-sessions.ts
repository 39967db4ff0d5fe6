import { initializeLogger } from '@livekit/agents';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { answer, BusClient, safeError, type Logger } from '@vab/bus';
import {
  AppError,
  Subjects,
  TextEndRequest,
  TextTurnRequest,
  textSessionOwnerSubject,
  type Ok,
  type StartTextSessionBody,
  type TextTurnResult,
} from '@vab/contracts';
import { compile } from '@vab/flow';
import type { PlaygroundConfig } from './config.js';
import { currentKeyEnv } from './env-keys.js';
import { FlowConversation, type RecordedMessage, type TransferTarget } from './runtime/conversation.js';
import { checkTextRuntime, createLlm, keyResolver } from './runtime/providers.js';

export type TextSessionsConfig = Pick<
  PlaygroundConfig,
  | 'ENV_FILE'
  | 'providerEnv'
  | 'MAX_SESSIONS'
  | 'TEXT_SESSION_IDLE_MS'
  | 'LLM_DECISION_TIMEOUT_MS'
  | 'WEBHOOK_TIMEOUT_MS'
  | 'BUS_TIMEOUT_MS'
>;

interface Entry {
  agentId: string;
  conv: FlowConversation;
  subs: Subscription[];
  startedAt: number;
  idle: NodeJS.Timeout | undefined;
  /** Appends to the transcript in order, one at a time. */
  recording: Promise<void>;
  closedRecord: boolean;
}

let agentsLoggerReady = false;

/**
 * Text test sessions held by this instance. Each is a FlowConversation without a room; its messages are
 * recorded, with their step, in a test session of type "text". Requests for a session this instance does
 * not hold are forwarded to the subject only its owner subscribes to.
 */
export class TextSessions {
  private readonly sessions = new Map<string, Entry>();
  private readonly bus: BusClient;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    private readonly config: TextSessionsConfig,
  ) {
    this.bus = new BusClient(nc);
    if (!agentsLoggerReady) {
      // LiveKit Agents refuses to build a session before its logger exists
      initializeLogger({ pretty: false, level: 'warn' });
      agentsLoggerReady = true;
    }
  }

  get size(): number {
    return this.sessions.size;
  }

  async start(agentId: string, body: StartTextSessionBody, requestId: string): Promise<TextTurnResult> {
    if (this.sessions.size >= this.config.MAX_SESSIONS) {
      throw new AppError('CAPACITY_EXHAUSTED', 'playground at capacity, retry shortly');
    }
    const opts = { timeoutMs: this.config.BUS_TIMEOUT_MS, requestId };
    const source = body.flow ?? (await this.bus.request(Subjects.agentsGet, { id: agentId }, opts)).flow;
    const compiled = compile(source);
    if (!compiled.ok) throw new AppError('FLOW_INVALID', 'the flow cannot run', { details: compiled.issues });
    const keys = keyResolver(
      body.apiKeys,
      await currentKeyEnv(this.config.ENV_FILE, this.config.providerEnv, this.log),
    );
    checkTextRuntime(compiled.config, keys);

    const record = await this.bus.request(
      Subjects.testSessionsCreate,
      { agentId, session: { sessionType: 'text' } },
      opts,
    );
    const sessionId = record.id;
    const log = this.log.child({ agentId, sessionId });
    const entry: Entry = {
      agentId,
      conv: undefined as unknown as FlowConversation,
      subs: [],
      startedAt: record.startedAt,
      idle: undefined,
      recording: Promise.resolve(),
      closedRecord: false,
    };
    entry.conv = new FlowConversation({
      flow: compiled.config,
      makeLlm: (cfg) => createLlm(cfg, keys),
      loadTransferTarget: (target) => this.loadTransferTarget(target, requestId),
      record: (m) => this.record(entry, sessionId, m, log),
      onEnded: () => void this.closeRecord(entry, sessionId, log),
      log,
      branchTimeoutMs: this.config.LLM_DECISION_TIMEOUT_MS,
      webhookTimeoutMs: this.config.WEBHOOK_TIMEOUT_MS,
    });
    this.sessions.set(sessionId, entry);
    entry.subs.push(
      this.nc.subscribe(textSessionOwnerSubject(sessionId, 'turn'), {
        callback: (_e, msg) =>
          void answer(this.nc, msg, log, msg.subject, TextTurnRequest, (req, ctx) =>
            this.turn(req.agentId, req.sessionId, req.text, ctx.requestId),
          ),
      }),
      this.nc.subscribe(textSessionOwnerSubject(sessionId, 'end'), {
        callback: (_e, msg) =>
          void answer(this.nc, msg, log, msg.subject, TextEndRequest, (req, ctx) =>
            this.end(req.agentId, req.sessionId, ctx.requestId),
          ),
      }),
    );
    try {
      const first = await entry.conv.start();
      this.touch(sessionId, entry);
      log.info('text session started');
      return { sessionId, ...first };
    } catch (err) {
      log.error({ err: safeError(err) }, 'text session failed to start');
      await this.end(agentId, sessionId, requestId);
      throw new AppError('UPSTREAM_FAILED', 'the agent could not start');
    }
  }

  async turn(agentId: string, sessionId: string, text: string, requestId: string): Promise<TextTurnResult> {
    const entry = this.sessions.get(sessionId);
    if (!entry) {
      return this.bus.requestTo<TextTurnResult>(
        textSessionOwnerSubject(sessionId, 'turn'),
        { agentId, sessionId, text },
        { timeoutMs: 60_000, requestId, onNoResponders: notFound(sessionId) },
      );
    }
    if (entry.agentId !== agentId) throw notFound(sessionId);
    this.touch(sessionId, entry);
    return { sessionId, ...(await entry.conv.userTurn(text)) };
  }

  /** Idempotent: an unknown or already ended session answers ok. */
  async end(agentId: string, sessionId: string, requestId: string): Promise<Ok> {
    const entry = this.sessions.get(sessionId);
    if (!entry) {
      return this.bus
        .requestTo<Ok>(
          textSessionOwnerSubject(sessionId, 'end'),
          { agentId, sessionId },
          {
            timeoutMs: this.config.BUS_TIMEOUT_MS + 5000,
            requestId,
            onNoResponders: new AppError('NOT_FOUND', 'gone'),
          },
        )
        .catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'NOT_FOUND') return { ok: true as const };
          throw err;
        });
    }
    if (entry.agentId !== agentId) return { ok: true };
    this.sessions.delete(sessionId);
    clearTimeout(entry.idle);
    for (const s of entry.subs) s.unsubscribe();
    const log = this.log.child({ agentId, sessionId });
    await entry.conv.close();
    await this.closeRecord(entry, sessionId, log);
    log.info('text session ended');
    return { ok: true };
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.sessions.entries()].map(([id, e]) => this.end(e.agentId, id, 'shutdown')));
  }

  private touch(sessionId: string, entry: Entry): void {
    clearTimeout(entry.idle);
    entry.idle = setTimeout(() => {
      this.log.info({ sessionId }, 'text session idle; ending it');
      void this.end(entry.agentId, sessionId, 'idle');
    }, this.config.TEXT_SESSION_IDLE_MS);
    entry.idle.unref();
  }

  private record(entry: Entry, sessionId: string, message: RecordedMessage, log: Logger): void {
    entry.recording = entry.recording.then(async () => {
      try {
        await this.bus.request(
          Subjects.messagesAppend,
          { agentId: entry.agentId, sessionId, message },
          { timeoutMs: this.config.BUS_TIMEOUT_MS, requestId: sessionId },
        );
      } catch (err) {
        // the conversation goes on; the gap is logged
        log.warn({ err: safeError(err), role: message.role, stepId: message.stepId }, 'message not recorded');
      }
    });
  }

  /** Closes the test session record once, after every message has been written. */
  private async closeRecord(entry: Entry, sessionId: string, log: Logger): Promise<void> {
    if (entry.closedRecord) return;
    entry.closedRecord = true;
    await entry.recording;
    const endedAt = Math.max(Date.now(), entry.startedAt);
    try {
      await this.bus.request(
        Subjects.testSessionsClose,
        { agentId: entry.agentId, sessionId, close: { endedAt, durationMs: endedAt - entry.startedAt } },
        { timeoutMs: this.config.BUS_TIMEOUT_MS, requestId: sessionId },
      );
    } catch (err) {
      log.warn({ err: safeError(err) }, 'test session not closed');
    }
  }

  private async loadTransferTarget(agentId: string, requestId: string): Promise<TransferTarget> {
    const opts = { timeoutMs: this.config.BUS_TIMEOUT_MS, requestId };
    try {
      const found = await this.bus.request(Subjects.agentsLookup, { id: agentId }, opts);
      if (!found.exists) return { ok: false, reason: 'missing' };
      if (found.archived) return { ok: false, reason: 'archived' };
      const compiled = compile((await this.bus.request(Subjects.agentsGet, { id: agentId }, opts)).flow);
      return compiled.ok ? { ok: true, flow: compiled.config } : { ok: false, reason: 'invalid' };
    } catch (err) {
      this.log.warn({ err: safeError(err), targetAgentId: agentId }, 'transfer target not loaded');
      return { ok: false, reason: 'error' };
    }
  }
}

const notFound = (sessionId: string) =>
  new AppError('NOT_FOUND', `text session ${sessionId} not found (ended or expired)`);
