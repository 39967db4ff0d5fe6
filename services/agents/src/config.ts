import { loadConfig as load, RedisEnv } from '@vab/service-kit';

export type AgentsConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv) {
  return load(RedisEnv, env);
}
