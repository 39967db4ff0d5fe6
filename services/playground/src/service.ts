import type { NatsConnection } from '@nats-io/transport-node';
import {
  MemoryIdempotencyStore,
  safeError,
  serve,
  type HandlerTable,
  type IdempotencyStore,
  type Logger,
  type Served,
} from '@vab/bus';
import { PLAYGROUND_INSTANCES_SUBJECT, Subjects } from '@vab/contracts';
import type { PlaygroundConfig } from './config.js';
import { agentSessionCreate } from './handlers/agent-session-create.js';
import { agentSessionEnd } from './handlers/agent-session-end.js';
import { envKeys } from './handlers/env-keys.js';
import { flowsValidate } from './handlers/flows-validate.js';
import { playgroundHealth } from './handlers/playground-health.js';
import { textSessionEnd } from './handlers/text-session-end.js';
import { textSessionStart } from './handlers/text-session-start.js';
import { textSessionTurn } from './handlers/text-session-turn.js';
import { TextSessions, type TextSessionsConfig } from './text-sessions.js';
import { LiveKitAgentRunner, type AgentRunner } from './voice/runner.js';
import { VoiceSessions, type VoiceSessionsConfig } from './voice/voice-sessions.js';

export type PlaygroundServiceConfig = Pick<
  PlaygroundConfig,
  'ENV_FILE' | 'providerEnv' | 'MAX_SESSIONS' | 'REAPER_INTERVAL_MS'
> &
  TextSessionsConfig &
  VoiceSessionsConfig;

/** The subjects that start sessions: an instance at capacity leaves their queue groups. */
const CREATE_SUBJECTS = [Subjects.agentSessionCreate, Subjects.textSessionStart];

export interface PlaygroundService extends Served {
  voice: VoiceSessions;
  text: TextSessions;
}

/**
 * Serves the playground subjects. Capacity: at MAX_SESSIONS (voice and text together) the instance stops
 * taking new sessions by leaving the create subjects' queue group until a slot frees. Stopping it ends
 * every session it holds and stops the reaper.
 */
export function startPlaygroundService(deps: {
  nc: NatsConnection;
  log: Logger;
  config: PlaygroundServiceConfig;
  runner?: AgentRunner;
  /** Where Idempotency-Keys are kept; default: this instance's memory (a retry must reach the same instance). */
  idempotency?: IdempotencyStore;
}): PlaygroundService {
  const { nc, log, config } = deps;
  // set once serve() has subscribed; session counts only change after that
  const ctl: { served?: Served } = {};
  let full = false;
  const recount = () => {
    const count = voice.size + text.size;
    const served = ctl.served;
    if (!served) return;
    if (!full && count >= config.MAX_SESSIONS) {
      full = true;
      for (const s of CREATE_SUBJECTS) served.pause(s);
      log.warn({ sessions: count }, 'at capacity: no longer taking new sessions');
    } else if (full && count < config.MAX_SESSIONS) {
      full = false;
      for (const s of CREATE_SUBJECTS) served.resume(s);
      log.info({ sessions: count }, 'taking new sessions again');
    }
  };
  const voice = new VoiceSessions(nc, log, config, deps.runner ?? new LiveKitAgentRunner(), recount);
  const text = new TextSessions(nc, log, config, recount);
  const handlers: HandlerTable<'playground'> = {
    'playground.flows.validate': flowsValidate(),
    'playground.env-keys': envKeys(config),
    'playground.health': playgroundHealth(),
    'playground.text.start': textSessionStart(text),
    'playground.text.turn': textSessionTurn(text),
    'playground.text.end': textSessionEnd(text),
    'playground.session.create': agentSessionCreate(voice),
    'playground.session.end': agentSessionEnd(voice),
  };
  const s = serve(nc, {
    service: 'playground',
    handlers,
    log,
    idempotent: {
      store: deps.idempotency ?? new MemoryIdempotencyStore(24 * 3600_000),
      subjects: ['playground.session.create', 'playground.text.start'],
    },
  });
  ctl.served = s;
  // who is alive, for every instance's reaper
  const alive = nc.subscribe(PLAYGROUND_INSTANCES_SUBJECT, {
    callback: (_e, msg) => void msg.respond(config.INSTANCE_ID),
  });
  const reaper = setInterval(() => {
    voice.reap().catch((err: unknown) => log.warn({ err: safeError(err) }, 'reaper run failed'));
  }, config.REAPER_INTERVAL_MS);
  reaper.unref();
  return {
    voice,
    text,
    ready: s.ready,
    inFlight: s.inFlight,
    pause: s.pause,
    resume: s.resume,
    async stop(timeoutMs) {
      clearInterval(reaper);
      await s.stop(timeoutMs);
      // stop all, then leave: the other instances must not see this one alive while its rooms go
      await Promise.all([voice.stopAll('shutdown'), text.stopAll()]);
      alive.unsubscribe();
    },
  };
}
