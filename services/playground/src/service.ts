import type { NatsConnection } from '@nats-io/transport-node';
import { serve, type HandlerTable, type Logger, type Served } from '@vab/bus';
import type { PlaygroundConfig } from './config.js';
import { envKeys } from './handlers/env-keys.js';
import { flowsValidate } from './handlers/flows-validate.js';
import { playgroundHealth } from './handlers/playground-health.js';

export function playgroundHandlers(
  config: Pick<PlaygroundConfig, 'ENV_FILE' | 'providerEnv'>,
): HandlerTable<'playground'> {
  return {
    'playground.flows.validate': flowsValidate(),
    'playground.env-keys': envKeys(config),
    'playground.health': playgroundHealth(),
  };
}

export function startPlaygroundService(deps: {
  nc: NatsConnection;
  log: Logger;
  config: Pick<PlaygroundConfig, 'ENV_FILE' | 'providerEnv'>;
}): Served {
  return serve(deps.nc, { service: 'playground', handlers: playgroundHandlers(deps.config), log: deps.log });
}
