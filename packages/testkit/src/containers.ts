import type { StartedTestContainer } from 'testcontainers';

export interface ContainerServers {
  natsUrl: string;
  redisUrl: string;
  stop(): Promise<void>;
}

/**
 * Where a Docker engine answers, the shared test servers run in containers. The check is cheap: without an
 * engine testcontainers rejects in a few milliseconds, and we fall back to local binaries.
 */
export async function tryStartContainers(maxPayload: number): Promise<ContainerServers | undefined> {
  let tc: typeof import('testcontainers');
  try {
    tc = await import('testcontainers');
    await tc.getContainerRuntimeClient();
  } catch {
    return undefined;
  }
  const started: StartedTestContainer[] = [];
  try {
    const nats = await new tc.GenericContainer('nats:2.10-alpine')
      // nats-server has no command-line flag for max_payload; it takes it from a config file.
      .withCopyContentToContainer([
        { content: `port: 4222\nmax_payload: ${maxPayload}\n`, target: '/etc/nats/test.conf' },
      ])
      .withCommand(['-c', '/etc/nats/test.conf'])
      .withExposedPorts(4222)
      .withWaitStrategy(tc.Wait.forLogMessage(/Server is ready/))
      .start();
    started.push(nats);
    const redis = await new tc.GenericContainer('redis:7-alpine')
      .withCommand(['redis-server', '--save', '', '--appendonly', 'no'])
      .withExposedPorts(6379)
      .withWaitStrategy(tc.Wait.forLogMessage(/Ready to accept connections/))
      .start();
    started.push(redis);
    return {
      natsUrl: `nats://${nats.getHost()}:${nats.getMappedPort(4222)}`,
      redisUrl: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
      stop: async () => {
        await Promise.all(started.map((c) => c.stop()));
      },
    };
  } catch (err) {
    await Promise.all(started.map((c) => c.stop().catch(() => undefined)));
    throw err;
  }
}
