import type { StartedTestContainer } from 'testcontainers';

export interface ContainerServer {
  url: string;
  dispose(): Promise<void>;
}

let runtimeAnswers: Promise<boolean> | undefined;

/** Whether a Docker engine answers; without one testcontainers rejects in a few milliseconds. */
export function dockerAnswers(): Promise<boolean> {
  runtimeAnswers ??= import('testcontainers')
    .then((tc) => tc.getContainerRuntimeClient())
    .then(
      () => true,
      () => false,
    );
  return runtimeAnswers;
}

async function started(c: StartedTestContainer, port: number, scheme: string): Promise<ContainerServer> {
  return {
    url: `${scheme}://${c.getHost()}:${c.getMappedPort(port)}`,
    dispose: async () => {
      await c.stop();
    },
  };
}

export async function startNatsContainer(maxPayload: number): Promise<ContainerServer> {
  const tc = await import('testcontainers');
  const c = await new tc.GenericContainer('nats:2.10-alpine')
    // nats-server has no command-line flag for max_payload; it takes it from a config file.
    .withCopyContentToContainer([
      {
        content: `port: 4222\nmax_payload: ${maxPayload}\njetstream { store_dir: /tmp/js }\n`,
        target: '/etc/nats/test.conf',
      },
    ])
    .withCommand(['-c', '/etc/nats/test.conf'])
    .withExposedPorts(4222)
    .withWaitStrategy(tc.Wait.forLogMessage(/Server is ready/))
    .start();
  return started(c, 4222, 'nats');
}

export async function startRedisContainer(): Promise<ContainerServer> {
  const tc = await import('testcontainers');
  const c = await new tc.GenericContainer('redis:7-alpine')
    .withCommand(['redis-server', '--save', '', '--appendonly', 'no'])
    .withExposedPorts(6379)
    .withWaitStrategy(tc.Wait.forLogMessage(/Ready to accept connections/))
    .start();
  return started(c, 6379, 'redis');
}
