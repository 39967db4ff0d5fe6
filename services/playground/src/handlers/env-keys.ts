import type { Handler } from '@vab/bus';
import type { PlaygroundConfig } from '../config.js';
import { currentKeyEnv, keyStatus } from '../env-keys.js';

export const envKeys =
  (config: Pick<PlaygroundConfig, 'ENV_FILE' | 'providerEnv'>): Handler<'playground.env-keys'> =>
  async (_req, ctx) =>
    keyStatus(await currentKeyEnv(config.ENV_FILE, config.providerEnv, ctx.log));
