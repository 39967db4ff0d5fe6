import type { NatsConnection } from '@nats-io/transport-node';
import { serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import type { PlaygroundConfig } from './config.js';
import { envKeys } from './handlers/env-keys.js';
import { flowsValidate } from './handlers/flows-validate.js';
import { playgroundHealth } from './handlers/playground-health.js';
import { textSessionEnd } from './handlers/text-session-end.js';
import { textSessionStart } from './handlers/text-session-start.js';
import { textSessionTurn } from './handlers/text-session-turn.js';
import { TextSessions, type TextSessionsConfig } from './text-sessions.js';

export type PlaygroundServiceConfig = Pick<PlaygroundConfig, 'ENV_FILE' | 'providerEnv'> & TextSessionsConfig;

export function playgroundHandlers(
  config: PlaygroundServiceConfig,
  text: TextSessions,
): HandlerTable<'playground'> {
  return {
    'playground.flows.validate': flowsValidate(),
    'playground.env-keys': envKeys(config),
    'playground.health': playgroundHealth(),
    'playground.text.start': textSessionStart(text),
    'playground.text.turn': textSessionTurn(text),
    'playground.text.end': textSessionEnd(text),
  };
}

/** Serves the playground subjects; stopping it also ends every session this instance holds. */
export function startPlaygroundService(deps: {
  nc: NatsConnection;
  log: Logger;
  config: PlaygroundServiceConfig;
}): Served {
  const text = new TextSessions(deps.nc, deps.log, deps.config);
  const served = serve(deps.nc, {
    service: 'playground',
    handlers: playgroundHandlers(deps.config, text),
    log: deps.log,
  });
  return {
    ready: served.ready,
    inFlight: served.inFlight,
    async stop(timeoutMs) {
      await served.stop(timeoutMs);
      await text.stopAll();
    },
  };
}
