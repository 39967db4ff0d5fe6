import type { TestProject } from 'vitest/node';
import { startLocalNats, startLocalRedis, TEST_NATS_MAX_PAYLOAD, tryStartContainers } from '@vab/testkit';

declare module 'vitest' {
  export interface ProvidedContext {
    natsUrl: string;
    redisUrl: string;
  }
}

/**
 * One NATS and one Redis for the whole run, never the machine's shared ones: NATS_URL/REDIS_URL when the
 * caller names existing servers, else containers where a Docker engine answers, else local binaries on
 * free ports.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const stops: (() => Promise<void>)[] = [];
  let natsUrl = process.env.NATS_URL;
  let redisUrl = process.env.REDIS_URL;
  if (!natsUrl || !redisUrl) {
    const containers = await tryStartContainers(TEST_NATS_MAX_PAYLOAD);
    if (containers) {
      stops.push(() => containers.stop());
      natsUrl ??= containers.natsUrl;
      redisUrl ??= containers.redisUrl;
    }
  }
  if (!natsUrl) {
    const nats = await startLocalNats();
    stops.push(() => nats.dispose());
    natsUrl = nats.url;
  }
  if (!redisUrl) {
    const redis = await startLocalRedis();
    stops.push(() => redis.dispose());
    redisUrl = redis.url;
  }
  project.provide('natsUrl', natsUrl);
  project.provide('redisUrl', redisUrl);
  return async () => {
    for (const stop of stops.reverse()) await stop();
  };
}
