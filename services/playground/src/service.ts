import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, serve, type HandlerTable, type Interceptor, type Logger, type Served } from '@vab/bus';
import { idempotency, MemoryIdempotencyStore, type Tracing } from '@vab/service-kit';
import { Subjects } from '@vab/contracts';
import type { PlaygroundConfig } from './config.js';
import { createEgressFetch, createHostCheck, type Resolver } from './egress/client.js';
import { EgressPolicy } from './egress/policy.js';
import { currentKeyEnv, keyStatus } from './env-keys.js';
import { ensureEventsStream } from './host/events.js';
import { CallerSlots } from './host/caller-slots.js';
import { EncoderHost } from './host/encoder-host.js';
import { RecorderThread } from './host/recorder-thread.js';
import { RecordingsBucket } from './host/recordings-bucket.js';
import { secretsInPlay } from './host/redactor.js';
import { SessionHost } from './host/session-host.js';
import { KeyRule } from './provider-keys.js';
import { ReadinessCheck } from './readiness.js';
import { ConversationKit } from './runtime/conversations.js';
import { LiveKitTransport } from './transports/livekit/livekit-transport.js';
import { LiveKitAgentRunner, type AgentRunner } from './transports/livekit/runner.js';
import { CaseGenerator } from './testing/generate.js';
import { TestCaseTransport } from './transports/test-case.js';
import { TextTransport } from './transports/text.js';
import { VoiceSocketTransport } from './transports/voice-socket/voice-socket-transport.js';
import { prewarmVoiceModels } from './runtime/voice-models.js';
import { traceLiveKit } from './telemetry.js';

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
  host: SessionHost;
  voice: LiveKitTransport;
  text: TextTransport;
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
  return { policy, egressFetch, checkHost, readiness };
}

/** How a test case's attempt is bounded and paced. */
function caseTimings(config: PlaygroundServiceConfig) {
  return {
    busTimeoutMs: config.BUS_TIMEOUT_MS,
    modelTimeoutMs: config.LLM_DECISION_TIMEOUT_MS,
    voiceSim: { answerTimeoutMs: config.VOICE_SIM_ANSWER_TIMEOUT_MS, settleMs: config.VOICE_SIM_SETTLE_MS },
  };
}

/**
 * Serves the playground subjects: flow validation, key status, and sessions — voice (LiveKit) and text —
 * on one session host. Stopping it ends every session it holds and stops the reaper.
 */
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
  runner?: AgentRunner;
  /** Idempotency-Key handling; default: keys kept in this instance's memory (a retry must reach it again). */
  idempotency?: Interceptor;
  /** How names in flow URLs resolve (tests); default: the system's resolver. */
  resolve?: Resolver;
  /** This process's tracing (service-kit's `startTracing`): LiveKit Agents' spans go to its provider. */
  tracing?: Tracing | undefined;
}

export function startPlaygroundService(deps: PlaygroundServiceDeps): PlaygroundService {
  const { nc, log, config } = deps;
  traceLiveKit(deps.tracing);
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
  const { policy, egressFetch, checkHost, readiness } = outboundOf(config, log, deps.resolve);
  const quota = { quota: config.MAX_SESSIONS_PER_CALLER, leaseMs: config.CALLER_SLOT_LEASE_MS };
  const slots = quota.quota > 0 ? new CallerSlots(nc, quota, log) : undefined;
  const host = new SessionHost({ nc, bus, log, config, createSubjects: CREATE_SUBJECTS, recordings, slots });
  const kit = new ConversationKit({ bus, readiness, env, egressFetch, config });
  const text = new TextTransport({ host, bus, readiness, kit, env, busTimeoutMs: config.BUS_TIMEOUT_MS });
  const cases = new TestCaseTransport({ host, bus, readiness, text, kit, env, ...caseTimings(config) });
  const generator = new CaseGenerator({
    bus,
    readiness,
    env,
    busTimeoutMs: config.BUS_TIMEOUT_MS,
    // one answer carries up to 20 proposals: longer than one decision
    modelTimeoutMs: 4 * config.LLM_DECISION_TIMEOUT_MS,
  });
  const audio = new VoiceSocketTransport({ host, bus, nc, readiness, kit, env, config });
  const voice = new LiveKitTransport({
    host,
    bus,
    nc,
    readiness,
    kit,
    env,
    log,
    config,
    policy,
    egressFetch,
    checkHost,
    runner: deps.runner ?? new LiveKitAgentRunner(),
  });

  const handlers: HandlerTable<'playground'> = {
    'playground.flows.validate': async ({ sessionType, ...flow }) =>
      readiness.validate(flow, sessionType, await env()),
    'playground.env-keys': async () => keyStatus(await env()),
    'playground.health': async () => ({ service: 'playground', ok: true }),
    // what starts a session runs as its caller: the host holds each caller to MAX_SESSIONS_PER_CALLER
    'playground.text.start': (req, ctx) =>
      host.asCaller(ctx.caller, () => text.start(req.agentId, req.body, ctx.requestId)),
    'playground.text.turn': (req, ctx) => text.turn({ ...req, requestId: ctx.requestId }),
    'playground.text.end': (req, ctx) => text.end(req.agentId, req.sessionId, ctx.requestId),
    'playground.voice.start': (req, ctx) =>
      host.asCaller(ctx.caller, () => audio.start(req.agentId, req.body, ctx.requestId)),
    'playground.voice.end': (req, ctx) => audio.end(req.agentId, req.sessionId, ctx.requestId, req.reason),
    'playground.room.create': (req, ctx) => host.asCaller(ctx.caller, () => voice.create(req, ctx.requestId)),
    'playground.room.end': (req, ctx) => voice.end(req.roomName, ctx.requestId),
    // an attempt holds a slot of the run's caller, as their own sessions do
    'playground.cases.run': (req, ctx) => host.asCaller(ctx.caller, () => cases.run(req, ctx.requestId)),
    'playground.cases.generate': (req, ctx) => generator.generate(req.agentId, req.body, ctx.requestId),
  };
  const served = serve(nc, {
    service: 'playground',
    handlers,
    log,
    idempotency: deps.idempotency ?? idempotency(new MemoryIdempotencyStore(24 * 3600_000)),
  });
  host.attach(served);
  voice.startReaping();
  return {
    ...served,
    // sessions start only once their events have a stream to go to, and their recordings a bucket
    ready: Promise.all([served.ready, ensureEventsStream(nc, config, log), recordings?.bucket.ready()]).then(
      noop,
    ),
    host,
    voice,
    text,
    async stop(timeoutMs) {
      voice.stopReaping();
      await served.stop(timeoutMs);
      // stop all, then leave: the other instances must not see this one alive while its rooms go
      await host.stopAll('shutdown');
      recordings?.encoders.stop();
      await recordings?.timeline.stop();
      host.detach();
      voice.leave();
    },
  };
}
