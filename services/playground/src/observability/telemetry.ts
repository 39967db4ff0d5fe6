import { initializeLogger, telemetry } from '@livekit/agents';
import { briefError, createLogger, type Tracing } from '@vab/service-kit';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DestinationStream } from 'pino';
import { behindRealTime } from '../models/behind-real-time.js';

const traced = new WeakSet<object>();

/**
 * LiveKit Agents' own spans (a session, its turns, each model request with the GenAI conventions, tool
 * calls) go to this process's provider: the engine's instrumentation rather than ours around it. LiveKit
 * strips its content attributes (instructions, messages, transcripts, tool arguments and results) before
 * every exporter unless `allowPii`; that is the operator's one content opt-in here too. Once per provider.
 */
export function traceLiveKit(tracing: Tracing | undefined): void {
  const provider = tracing?.provider;
  if (!tracing?.enabled || !provider || traced.has(provider)) return;
  traced.add(provider);
  telemetry.setTracerProvider(provider, {
    registerSpanProcessor: (processor) => tracing.addSpanProcessor(processor),
    allowPii: tracing.captureContent,
  });
}

/** The session a LiveKit line was written in: its id (as the playground's own lines name it), agent, request. */
export interface SessionLogFields {
  sessionId: string;
  agentId?: string | undefined;
  requestId?: string | undefined;
}

const sessionFields = new AsyncLocalStorage<SessionLogFields>();

/** Runs `fn` as work of that session: what LiveKit logs within it (its tasks inherit the context) names it. */
export const inSession = <T>(fields: SessionLogFields, fn: () => T): T =>
  sessionFields.run({ ...sessionFields.getStore(), ...fields }, fn);

// a VAD stream made within a session reports its lag under that session's id
behindRealTime.sessionOf = () => sessionFields.getStore()?.sessionId;

/** Where LiveKit Agents' `log()` finds its logger (a global, so its ESM and CJS builds share one). */
const LIVEKIT_LOGGER = Symbol.for('@livekit/agents:logger');

let liveKitLoggerOurs = false;

/**
 * Whether LiveKit logs through a logger of ours (`logLiveKitAs`) in this thread: LiveKit's own `loggerOptions()`
 * says only that someone called its `initializeLogger` (a unit test does, with LiveKit's unfiltered default).
 */
export const liveKitLogsOurs = (): boolean => liveKitLoggerOurs;

/**
 * LiveKit Agents writes through a pino logger of its own (epoch times, whole stack traces, no session). Its
 * `initializeLogger` takes only `pretty` and `level`, so after it this process puts a logger of the stack's
 * format where `log()` reads it: ISO times, `service`, redaction, the trace ids, `component: "livekit"`, the
 * session's id, agent and request (bound with `inSession`), and an error as its type, message and code. Its
 * level is `warn` (LiveKit's info lines are per-turn chatter) unless LOG_LEVEL asks for more.
 */
export function logLiveKitAs(level: string, destination?: DestinationStream): void {
  liveKitLoggerOurs = true;
  const livekitLevel = level === 'debug' || level === 'trace' ? level : 'warn';
  initializeLogger({ pretty: false, level: livekitLevel });
  (globalThis as Record<symbol, unknown>)[LIVEKIT_LOGGER] = createLogger(
    'playground',
    livekitLevel,
    destination,
    {
      base: { component: 'livekit' },
      fields: () => ({ ...sessionFields.getStore() }),
      serializers: { error: briefError, err: briefError },
      // LiveKit marks what a user said, a tool's arguments and output, the chat context with `lk.pii.*`:
      // transcripts never reach our logs
      dropFields: /^lk\.pii\./,
    },
  );
}
