import { envInt, loadConfig as load, MetricsEnv, RedisEnv } from '@vab/service-kit';

export type AgentsConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv) {
  return load(
    {
      ...RedisEnv,
      ...MetricsEnv,
      /** Newest versions kept per agent; older ones go unless a deploy record names them. */
      MAX_VERSIONS_PER_AGENT: envInt(50, 1),
    },
    env,
  );
}
