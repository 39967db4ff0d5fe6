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
import { Recorder } from './recorder.js';
import { FlowConversation, type TransferTarget } from './runtime/conversation.js';
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
  idle: NodeJS.Timeout | undefined;
  recorder: Recorder;
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
    /** Told whenever the number of sessions changes (capacity). */
    private readonly onCountChange: () => void = () => undefined,
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
    const recorder = new Recorder(
      this.bus,
      agentId,
      sessionId,
      record.startedAt,
      log,
      this.config.BUS_TIMEOUT_MS,
    );
    const entry: Entry = {
      agentId,
      conv: undefined as unknown as FlowConversation,
      subs: [],
      idle: undefined,
      recorder,
    };
    entry.conv = new FlowConversation({
      flow: compiled.config,
      makeLlm: (cfg) => createLlm(cfg, keys),
      loadTransferTarget: (target) =>
        loadTransferTarget(this.bus, this.config.BUS_TIMEOUT_MS, target, requestId, this.log),
      record: (m) => recorder.record(m),
      onEnded: () => void recorder.close(),
      log,
      branchTimeoutMs: this.config.LLM_DECISION_TIMEOUT_MS,
      webhookTimeoutMs: this.config.WEBHOOK_TIMEOUT_MS,
    });
    this.sessions.set(sessionId, entry);
    this.onCountChange();
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
    this.onCountChange();
    clearTimeout(entry.idle);
    for (const s of entry.subs) s.unsubscribe();
    const log = this.log.child({ agentId, sessionId });
    await entry.conv.close();
    await entry.recorder.close();
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
}

/** Loads and compiles the target of a transfer step; the reason when it cannot run. */
export async function loadTransferTarget(
  bus: BusClient,
  timeoutMs: number,
  agentId: string,
  requestId: string,
  log: Logger,
): Promise<TransferTarget> {
  const opts = { timeoutMs, requestId };
  try {
    const found = await bus.request(Subjects.agentsLookup, { id: agentId }, opts);
    if (!found.exists) return { ok: false, reason: 'missing' };
    if (found.archived) return { ok: false, reason: 'archived' };
    const compiled = compile((await bus.request(Subjects.agentsGet, { id: agentId }, opts)).flow);
    return compiled.ok ? { ok: true, flow: compiled.config } : { ok: false, reason: 'invalid' };
  } catch (err) {
    log.warn({ err: safeError(err), targetAgentId: agentId }, 'transfer target not loaded');
    return { ok: false, reason: 'error' };
  }
}

const notFound = (sessionId: string) =>
  new AppError('NOT_FOUND', `text session ${sessionId} not found (ended or expired)`);
