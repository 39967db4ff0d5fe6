import type { NatsConnection } from '@nats-io/transport-node';
import {
  busClientOf,
  serve,
  type BusClient,
  type HandlerTable,
  type Interceptor,
  type Logger,
  type Served,
} from '@vab/bus';
import { pino } from 'pino';
import { idempotency, MemoryIdempotencyStore, type StopMode, type Tracing } from '@vab/service-kit';
import { Subjects } from '@vab/contracts';
import type { PlaygroundConfig } from './config.js';
import { createEgressFetch, createHostCheck, type Resolver } from './egress/client.js';
import { EgressPolicy } from './egress/policy.js';
import { currentKeyEnv, keyStatus } from './models/env-keys.js';
import { ensureEventsStream } from './sessions/events.js';
import { CallerSlots } from './sessions/caller-slots.js';
import { EncoderHost } from './recording/encoder-host.js';
import { RecorderThread } from './recording/recorder-thread.js';
import { RecordingsBucket } from './recording/recordings-bucket.js';
import { HostedSessions } from './sessions/hosted-sessions.js';
import { redactingDestination, secretsInPlay } from './sessions/redactor.js';
import { KeyRule, type KeyEnv } from './models/provider-keys.js';
import { DeployCheck } from './live/deploy-check.js';
import { Sealer } from './live/sealing.js';
import { StoredCredentials } from './live/stored-credentials.js';
import { LiveCalls } from './live/live-calls.js';
import { CallAnalyst } from './analysis/call-analyst.js';
import { AnalysisWorker } from './analysis/analysis-worker.js';
import { ModelFactory } from './models/model-factory.js';
import { ReadinessCheck } from './models/readiness.js';
import { ConversationKit } from './conversation/conversation-kit.js';
import { RoomTransport } from './transports/room/room-transport.js';
import { LiveKitRoomAgents, type RoomAgents } from './transports/room/room-agents.js';
import { CaseGenerator } from './testing/generate.js';
import { TestCaseAttempts } from './testing/test-case-attempts.js';
import { TextTransport } from './transports/text.js';
import { VoiceSocketTransport } from './transports/voice-socket.js';
import { prewarmVoiceModels } from './models/voice-models.js';
import { liveKitLogsOurs, logLiveKitAs, traceLiveKit } from './observability/telemetry.js';

export type PlaygroundServiceConfig = Omit<
  PlaygroundConfig,
  | 'NATS_URL'
  | 'NATS_USER'
  | 'NATS_PASS'
  | 'REDIS_URL'
  | 'REDIS_CLUSTER_NODES'
  | 'REDIS_CLUSTER_PASSWORD'
  | 'METRICS_PORT'
  | 'METRICS_HOST'
>;

/** The subjects that start sessions: an instance at capacity leaves their queue groups. */
const CREATE_SUBJECTS = [
  Subjects.agentSessionCreate,
  Subjects.voiceSessionStart,
  Subjects.textSessionStart,
  Subjects.testCaseRun,
];

export interface PlaygroundService extends Served {
  sessions: HostedSessions;
  room: RoomTransport;
  text: TextTransport;
  /** `drain` (default): what is in flight finishes within the bound, then the sessions end; `now`: they end first. */
  stop(timeoutMs: number, mode?: StopMode): Promise<void>;
}

/**
 * What stands between a flow and the network: the egress policy, the fetch that enforces it, and the
 * readiness check (with the key rule) every model a flow or a test case names goes through.
 */
function outboundOf(config: PlaygroundServiceConfig, log: Logger, resolve: Resolver | undefined) {
  const policy = new EgressPolicy(config.FLOW_EGRESS_ALLOW);
  const egressFetch = createEgressFetch({
    policy,
    timeoutMs: config.FLOW_EGRESS_TIMEOUT_MS,
    maxResponseBytes: config.FLOW_EGRESS_MAX_RESPONSE_BYTES,
    log,
    resolve,
  });
  const readiness = new ReadinessCheck({
    policy,
    keys: new KeyRule(config.TRUSTED_MODEL_URLS),
    egressFetch,
    egressTimeoutMs: config.FLOW_EGRESS_TIMEOUT_MS,
  });
  const checkHost = createHostCheck({ policy, log, resolve });
  return { policy, egressFetch, checkHost, readiness, models: new ModelFactory(readiness) };
}

/** How a test case's attempt is bounded and paced. */
function caseTimings(config: PlaygroundServiceConfig) {
  return {
    busTimeoutMs: config.BUS_TIMEOUT_MS,
    modelTimeoutMs: config.LLM_DECISION_TIMEOUT_MS,
    voiceSim: { answerTimeoutMs: config.VOICE_SIM_ANSWER_TIMEOUT_MS, settleMs: config.VOICE_SIM_SETTLE_MS },
  };
}

const noop = () => undefined;

/**
 * Where recordings go and what makes them (the encoders' host process started now, the timeline thread with the
 * first recording); none when they are off.
 */
function recordingsOf(nc: NatsConnection, config: PlaygroundServiceConfig, log: Logger) {
  if (config.RECORDINGS !== 'on') return undefined;
  const encoders = new EncoderHost(log);
  encoders.start();
  return { bucket: new RecordingsBucket(nc, config, log), encoders, timeline: new RecorderThread(log) };
}

export interface PlaygroundServiceDeps {
  nc: NatsConnection;
  log: Logger;
  config: PlaygroundServiceConfig;
  /** How a room session's agent joins its room (tests give one that joins nothing). */
  roomAgents?: RoomAgents;
  /** Idempotency-Key handling; default: keys kept in this instance's memory (a retry must reach it again). */
  idempotency?: Interceptor;
  /** How names in flow URLs resolve (tests); default: the system's resolver. */
  resolve?: Resolver;
  /** This process's tracing (service-kit's `startTracing`): LiveKit Agents' spans go to its provider. */
  tracing?: Tracing | undefined;
  /**
   * Whether this instance takes LiveKit room sessions (`playground.room.create`; default: it does). LiveKit's
   * native side hands its events to one thread of a process only, so of a process's threads only that one
   * hosts rooms (threads/thread-main.ts); the others serve everything else.
   */
  rooms?: boolean | undefined;
}

/**
 * Serves the playground subjects: flow validation, key status, and sessions — voice (the voice socket, a
 * LiveKit room) and text — hosted together. Stopping it ends every session it holds and stops the reaper.
 */
/** Issue 45's stored credentials (sealed here, opened here) and the deploy pipeline's readiness check. */
function liveParts(d: {
  bus: BusClient;
  config: PlaygroundServiceConfig;
  readiness: ReadinessCheck;
  env: () => Promise<KeyEnv>;
  sessions: HostedSessions;
  voice: VoiceSocketTransport;
  models: ModelFactory;
  nc: NatsConnection;
  log: Logger;
}) {
  const sealer = new Sealer({
    key: d.config.CREDENTIALS_KEY ?? d.config.CREDENTIALS_KEY_FILE,
    oldKeys: d.config.CREDENTIALS_OLD_KEYS,
  });
  const credentials = new StoredCredentials({ bus: d.bus, sealer, timeoutMs: d.config.BUS_TIMEOUT_MS });
  const check = new DeployCheck({ ...d, credentials, timeoutMs: d.config.BUS_TIMEOUT_MS });
  const calls = new LiveCalls({
    ...d,
    credentials,
    instanceId: d.config.INSTANCE_ID,
    timeoutMs: d.config.BUS_TIMEOUT_MS,
  });
  const handlers: Pick<
    HandlerTable<'playground'>,
    | 'playground.credentials.put'
    | 'playground.deploys.check'
    | 'playground.calls.start'
    | 'playground.calls.end'
  > = {
    // a call holds a slot of its edge's caller as any session does (the per-address cap is the sessions
    // service's, at admission)
    'playground.calls.start': (req, ctx) =>
      d.sessions.asCaller(ctx.caller, () => calls.start(req, ctx.requestId)),
    'playground.calls.end': (req, ctx) =>
      calls.end(req.agentId, req.callId, req.reason, ctx.requestId, req.detail),
    'playground.credentials.put': (req, ctx) => credentials.put(req.agentId, req.body, ctx.requestId),
    'playground.deploys.check': (req, ctx) => check.check(req.agentId, req.version, ctx.requestId),
  };
  // post-call analysis (issue 47): here because only this service opens the stored credentials and runs models
  const analyst = new CallAnalyst({
    bus: d.bus,
    models: d.models,
    credentials,
    env: d.env,
    busTimeoutMs: d.config.BUS_TIMEOUT_MS,
    modelTimeoutMs: d.config.LLM_DECISION_TIMEOUT_MS,
  });
  const analysis =
    d.config.ANALYSIS_CONCURRENCY > 0
      ? new AnalysisWorker({
          nc: d.nc,
          bus: d.bus,
          analyst,
          log: d.log,
          concurrency: d.config.ANALYSIS_CONCURRENCY,
          ackWaitMs: d.config.ANALYSIS_ACK_WAIT_MS,
          busTimeoutMs: d.config.BUS_TIMEOUT_MS,
        })
      : undefined;
  return { credentials, handlers, analysis };
}

/** Proposes test cases; one answer carries up to 20 proposals: bounded longer than one decision. */
function caseGenerator(d: {
  bus: BusClient;
  readiness: ReadinessCheck;
  models: ModelFactory;
  env: () => Promise<KeyEnv>;
  config: PlaygroundServiceConfig;
}) {
  const { config, ...rest } = d;
  return new CaseGenerator({
    ...rest,
    busTimeoutMs: config.BUS_TIMEOUT_MS,
    modelTimeoutMs: 4 * config.LLM_DECISION_TIMEOUT_MS,
  });
}

/**
 * LiveKit's traces, and its logger: the process (threads/instance.ts) gave it ours already; one that embeds the
 * service without it (the tests' in-process stacks) gets the same, filtered: LiveKit's own default writes a key
 * that a provider echoed in its error as it came (seen in CI's output).
 */
function observeLiveKit(level: string, tracing: Tracing | undefined): void {
  if (!liveKitLogsOurs()) logLiveKitAs(level, redactingDestination(pino.destination(1)));
  traceLiveKit(tracing);
}

export function startPlaygroundService(deps: PlaygroundServiceDeps): PlaygroundService {
  const { nc, log, config } = deps;
  observeLiveKit(config.LOG_LEVEL, deps.tracing);
  // the encoder host first, before the models make this process big (its one fork is cheap now); then, once
  // per process and before any session, the VAD and the end-of-turn model (~650 ms the first time)
  const recordings = recordingsOf(nc, config, log);
  prewarmVoiceModels();
  const bus = busClientOf(nc);
  // the server's keys as read, each time: the log's filter removes them from every line
  const env = async () => {
    const read = await currentKeyEnv(config.ENV_FILE, config.providerEnv, log);
    secretsInPlay.serverKeys(read);
    return read;
  };
  secretsInPlay.serverKeys(config.providerEnv);
  const { policy, egressFetch, checkHost, readiness, models } = outboundOf(config, log, deps.resolve);
  const quota = { quota: config.MAX_SESSIONS_PER_CALLER, leaseMs: config.CALLER_SLOT_LEASE_MS };
  const slots = quota.quota > 0 ? new CallerSlots(nc, quota, log) : undefined;
  const rooms = deps.rooms ?? true;
  const sessions = new HostedSessions({
    nc,
    bus,
    log,
    config,
    createSubjects: rooms
      ? CREATE_SUBJECTS
      : CREATE_SUBJECTS.filter((s) => s !== Subjects.agentSessionCreate),
    recordings,
    slots,
  });
  const kit = new ConversationKit({ bus, models, env, egressFetch, config });
  const text = new TextTransport({ sessions, bus, models, kit, env, busTimeoutMs: config.BUS_TIMEOUT_MS });
  const attempts = new TestCaseAttempts({ sessions, bus, models, text, kit, env, ...caseTimings(config) });
  const generator = caseGenerator({ bus, readiness, models, env, config });
  const voiceSocket = new VoiceSocketTransport({ sessions, bus, nc, models, kit, env, config });
  const room = new RoomTransport({
    sessions,
    bus,
    nc,
    models,
    kit,
    env,
    log,
    config,
    policy,
    egressFetch,
    checkHost,
    agents: deps.roomAgents ?? new LiveKitRoomAgents(),
  });

  const live = liveParts({ bus, config, readiness, env, sessions, voice: voiceSocket, models, nc, log });
  const handlers: HandlerTable<'playground'> = {
    'playground.flows.validate': async ({ sessionType, ...flow }) =>
      readiness.validate(flow, sessionType, await env()),
    'playground.env-keys': async () => keyStatus(await env()),
    'playground.health': async () => ({ service: 'playground', ok: true }),
    // what starts a session runs as its caller: admission holds each caller to MAX_SESSIONS_PER_CALLER
    'playground.text.start': (req, ctx) =>
      sessions.asCaller(ctx.caller, () => text.start(req.agentId, req.body, ctx.requestId)),
    'playground.text.turn': (req, ctx) => text.turn({ ...req, requestId: ctx.requestId }),
    'playground.text.end': (req, ctx) => text.end(req.agentId, req.sessionId, ctx.requestId),
    'playground.voice.start': (req, ctx) =>
      sessions.asCaller(ctx.caller, () => voiceSocket.start(req.agentId, req.body, ctx.requestId)),
    'playground.voice.end': (req, ctx) =>
      voiceSocket.end(req.agentId, req.sessionId, ctx.requestId, req.reason),
    'playground.room.create': (req, ctx) =>
      sessions.asCaller(ctx.caller, () => room.create(req, ctx.requestId)),
    'playground.room.end': (req, ctx) => room.end(req.roomName, ctx.requestId),
    // an attempt holds a slot of the run's caller, as their own sessions do
    'playground.cases.run': (req, ctx) =>
      sessions.asCaller(ctx.caller, () => attempts.run(req, ctx.requestId)),
    'playground.cases.generate': (req, ctx) => generator.generate(req.agentId, req.body, ctx.requestId),
    ...live.handlers,
  };
  // not subscribed at all: the room starts go to the instances (threads) that can host them
  if (!rooms) delete (handlers as Partial<HandlerTable<'playground'>>)['playground.room.create'];
  const served = serve(nc, {
    service: 'playground',
    handlers,
    log,
    idempotency: deps.idempotency ?? idempotency(new MemoryIdempotencyStore(24 * 3600_000)),
  });
  sessions.attach(served);
  room.startReaping();
  return {
    ...served,
    // sessions start only once their events have a stream to go to, and their recordings a bucket
    ready: Promise.all([
      served.ready,
      ensureEventsStream(nc, config, log),
      recordings?.bucket.ready(),
      live.analysis?.start(),
    ]).then(noop),
    sessions,
    room,
    text,
    stop: (timeoutMs, mode: StopMode = 'drain') =>
      stopService({ served, sessions, room, recordings, log, config, ...live }, timeoutMs, mode),
  };
}

/**
 * Stops serving, ends every session and leaves. `now` (npm start's Ctrl-C): the sessions end first, so a turn
 * waiting on its model, or a caller mid-sentence, ends with its session instead of holding the stop for the
 * whole bound; `drain` (SIGTERM, a rolling update): the instance leaves the start subjects at once, its sessions
 * may finish for DRAIN_TIMEOUT_MS (their turns and ends still served), those left say goodbye and end
 * (`drained`), then requests in flight finish.
 */
async function stopService(
  parts: {
    served: Served;
    sessions: HostedSessions;
    room: RoomTransport;
    recordings: ReturnType<typeof recordingsOf>;
    analysis: AnalysisWorker | undefined;
    log: Logger;
    config: Pick<PlaygroundServiceConfig, 'DRAIN_TIMEOUT_MS' | 'DRAIN_GOODBYE_MS'>;
  },
  timeoutMs: number,
  mode: StopMode,
): Promise<void> {
  const { served, sessions, room, recordings, log, config } = parts;
  room.stopReaping();
  // no new analysis; those in flight finish (or another instance takes them again)
  await parts.analysis?.stop();
  if (mode === 'now') await Promise.all([served.stop(timeoutMs), sessions.stopAll('shutdown')]);
  else {
    // a drain: no new session from now on (the other instances take them), while the sessions held finish
    const startedAt = Date.now();
    await sessions.drain();
    if (config.DRAIN_TIMEOUT_MS > 0 && sessions.size > 0) {
      log.info({ sessions: sessions.size, drainTimeoutMs: config.DRAIN_TIMEOUT_MS }, 'draining sessions');
      if (!(await sessions.settled(config.DRAIN_TIMEOUT_MS))) {
        log.info({ sessions: sessions.size }, 'drain timed out: ending the sessions left');
        await sessions.endDrained(config.DRAIN_GOODBYE_MS);
      }
    }
    await served.stop(Math.max(1000, timeoutMs - (Date.now() - startedAt)));
  }
  // stop all (in both modes: a start already delivered when the subscriptions drained is one more), then
  // leave: the other instances must not see this one alive while its rooms go
  await sessions.stopAll('shutdown');
  recordings?.encoders.stop();
  await recordings?.timeline.stop();
  sessions.detach();
  room.leave();
}
