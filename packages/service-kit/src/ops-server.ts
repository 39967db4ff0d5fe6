import { safeError } from '@vab/bus';
import type { NatsConnection } from '@nats-io/transport-node';
import type { RedisClient } from '@vab/storage';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import type { MetricsConfig } from './metrics.js';

/** One dependency's check: resolves true when it answers in time. */
export type Check = () => Promise<boolean>;

/** How long one readiness check may take: a scraper or orchestrator waits no longer for an answer. */
export const CHECK_TIMEOUT_MS = 1000;

const within = (ms: number, p: Promise<boolean>): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([p.catch(() => false), late]).finally(() => clearTimeout(timer));
};

/** NATS answers: the connection is open, not draining, and a flush makes the round trip to the server. */
export const natsCheck =
  (nc: NatsConnection): Check =>
  async () =>
    !nc.isClosed() &&
    !nc.isDraining() &&
    within(
      CHECK_TIMEOUT_MS,
      nc.flush().then(() => true),
    );

/** Redis answers: the client is connected and a PING comes back (a cluster: from one of its nodes). */
export const redisCheck =
  (redis: RedisClient): Check =>
  async () =>
    redis.status === 'ready' &&
    within(
      CHECK_TIMEOUT_MS,
      redis.ping().then((r) => r === 'PONG'),
    );

export interface OpsServer {
  /** The port it listens on (the system's choice when METRICS_PORT is 0). */
  port: number;
  close(): Promise<void>;
}

/**
 * A service process's operations endpoints, on METRICS_PORT: `/metrics` (Prometheus text), `/healthz` (the
 * process answers) and `/readyz` (each dependency up or down, 503 when one is down). Plain node:http: three
 * fixed answers need no framework, and it stays apart from the service's own work.
 */
export async function startOpsServer(opts: {
  config: MetricsConfig;
  registry: Registry;
  checks: Record<string, Check>;
  log: Logger;
}): Promise<OpsServer | undefined> {
  const { config, registry, checks, log } = opts;
  if (config.METRICS_PORT === undefined) return undefined;
  const runChecks = async () => {
    const names = Object.keys(checks);
    const up = await Promise.all(names.map((n) => within(CHECK_TIMEOUT_MS, checks[n]!())));
    return names.map((n, i) => [n, up[i]!] as const);
  };
  // the same checks as a series, so that an alert can say which dependency a process cannot reach
  new Gauge({
    name: 'dependency_up',
    help: 'Whether this process reaches a dependency it needs (1) or not (0), checked at each scrape.',
    labelNames: ['dependency'],
    registers: [registry],
    async collect() {
      for (const [dependency, up] of await runChecks()) this.set({ dependency }, up ? 1 : 0);
    },
  });
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(405, { status: 'method not allowed' });
    if (path === '/healthz') return json(200, { status: 'ok' });
    if (path === '/readyz') {
      void runChecks().then((results) => {
        const ready = results.every(([, up]) => up);
        json(ready ? 200 : 503, {
          status: ready ? 'ready' : 'not ready',
          checks: Object.fromEntries(results.map(([n, up]) => [n, up ? 'up' : 'down'])),
        });
      });
      return;
    }
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        },
        (err: unknown) => {
          log.error({ err: safeError(err) }, 'metrics not collected');
          json(500, { status: 'error' });
        },
      );
      return;
    }
    json(404, { status: 'not found' });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.METRICS_PORT, config.METRICS_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ host: config.METRICS_HOST, port }, 'metrics and health listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
