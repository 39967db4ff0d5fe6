import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, tcpProbe, waitFor } from './ports.js';
import {
  LocalProcessServer,
  localRedisServer,
  natsConfig,
  requireBinary,
  type TestServer,
} from './servers.js';
import { ownTempDir, removeTempDir } from './temp-dirs.js';

export interface ClusterNode {
  host: string;
  port: number;
  server: TestServer;
}

export interface LocalRedisCluster {
  nodes: ClusterNode[];
  /** Seed nodes as REDIS_CLUSTER_NODES takes them: `127.0.0.1:p1,127.0.0.1:p2,…`. */
  seeds: string;
  /** The node serving `key`'s slot as master now (CLUSTER KEYSLOT + CLUSTER NODES). */
  masterOf(key: string): ClusterNode;
  /** Resolves once every slot is served and every replica is in sync (after a failover, too). */
  settled(timeoutMs?: number): Promise<void>;
  dispose(): Promise<void>;
}

function redisCli(port: number, ...args: string[]): string {
  const r = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`redis-cli ${args.join(' ')}: ${r.stderr || r.stdout}`);
  return r.stdout;
}

/** Lines of CLUSTER NODES of the live nodes: id, port, flags, master id, slot ranges. */
function clusterNodes(port: number) {
  return redisCli(port, 'cluster', 'nodes')
    .trim()
    .split('\n')
    .map((line) => {
      const [id, addr, flags, master, , , , link, ...slots] = line.split(' ');
      return {
        id: id!,
        port: Number(addr!.split('@')[0]!.split(':')[1]),
        flags: flags!.split(','),
        master: master!,
        connected: link === 'connected',
        slots: slots.map((r) => r.split('-').map(Number) as [number, number?]),
      };
    });
}

/**
 * A real Redis Cluster on free ports: `masters` masters with `replicas` replicas each (`redis-server
 * --cluster-enabled`, joined by `redis-cli --cluster create`), a short `cluster-node-timeout` so a killed
 * master's replica takes over within about a second and a half.
 */
export async function startLocalRedisCluster(
  opts: { masters?: number; replicas?: number; nodeTimeoutMs?: number } = {},
): Promise<LocalRedisCluster> {
  requireBinary('redis-server', 'redis-server');
  requireBinary('redis-cli', 'redis-tools');
  const masters = opts.masters ?? 3;
  const replicas = opts.replicas ?? 1;
  const dir = ownTempDir('redis-cluster');
  const nodes: ClusterNode[] = [];
  const dispose = async () => {
    await Promise.all(nodes.map((n) => (n.server as LocalProcessServer).stop()));
    removeTempDir(dir);
  };
  try {
    for (let i = 0; i < masters * (1 + replicas); i++) {
      const port = await freePort();
      const server = localRedisServer(
        port,
        dir,
        [
          ...[
            '--appendonly',
            'no',
            '--cluster-enabled',
            'yes',
            '--cluster-config-file',
            `nodes-${port}.conf`,
          ],
          ...['--cluster-node-timeout', String(opts.nodeTimeoutMs ?? 1000)],
        ],
        () => undefined,
      );
      nodes.push({ host: '127.0.0.1', port, server });
      await server.start();
    }
    const create = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...nodes.map((n) => `127.0.0.1:${n.port}`),
        '--cluster-replicas',
        String(replicas),
        '--cluster-yes',
      ],
      { encoding: 'utf8' },
    );
    if (create.status !== 0) throw new Error(`redis-cli --cluster create: ${create.stdout}${create.stderr}`);
    const cluster: LocalRedisCluster = {
      nodes,
      seeds: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
      masterOf(key) {
        const alive = nodes.find((n) => tcpAlive(n.port))!;
        const slot = Number(redisCli(alive.port, 'cluster', 'keyslot', key).trim());
        const owner = clusterNodes(alive.port).find(
          (n) =>
            n.flags.includes('master') &&
            !n.flags.includes('fail') &&
            n.slots.some(([a, b]) => slot >= a && slot <= (b ?? a)),
        );
        const node = nodes.find((n) => n.port === owner?.port);
        if (!node) throw new Error(`no master serves slot ${slot}`);
        return node;
      },
      async settled(timeoutMs = 20_000) {
        await waitFor(
          'redis cluster',
          async () => {
            const alive = nodes.filter((n) => tcpAlive(n.port));
            return alive.every((n) => {
              const info = redisCli(n.port, 'cluster', 'info');
              if (!info.includes('cluster_state:ok')) return false;
              const role = redisCli(n.port, 'info', 'replication');
              return role.includes('role:master') || role.includes('master_link_status:up');
            });
          },
          timeoutMs,
        );
      },
      dispose,
    };
    await cluster.settled();
    return cluster;
  } catch (err) {
    await dispose();
    throw err;
  }
}

function tcpAlive(port: number): boolean {
  return spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'ping'], {
    encoding: 'utf8',
  }).stdout.includes('PONG');
}

export interface LocalNatsCluster {
  nodes: (ClusterNode & { url: string })[];
  /** Every node's client URL, comma-separated, as NATS_URL takes them. */
  urls: string;
  /** Resolves once every live node has a route to every other live node. */
  routed(timeoutMs?: number): Promise<void>;
  dispose(): Promise<void>;
}

/**
 * A real NATS cluster on free ports: `size` nats-servers joined by routes (each names every other), one
 * cluster name, the payload limit our stacks use. `configFile`: each node runs that file (e.g. the
 * deployment's cluster variant, with its users and permissions; `$VARIABLES` from `env`), with this test's
 * own addresses, ports and routes (command-line flags win).
 */
export async function startLocalNatsCluster(
  opts: { size?: number; configFile?: string; env?: Record<string, string> } = {},
): Promise<LocalNatsCluster> {
  requireBinary('nats-server', 'nats-server');
  const size = opts.size ?? 3;
  const dir = ownTempDir('nats-cluster');
  const ports = await Promise.all(
    Array.from({ length: size }, async () => ({
      client: await freePort(),
      route: await freePort(),
      monitor: await freePort(),
    })),
  );
  const nodes: LocalNatsCluster['nodes'] = [];
  const dispose = async () => {
    await Promise.all(nodes.map((n) => (n.server as LocalProcessServer).stop()));
    removeTempDir(dir);
  };
  try {
    for (const [i, p] of ports.entries()) {
      const conf = join(dir, `nats-${i}.conf`);
      const routes = ports.filter((_, j) => j !== i).map((o) => `"nats://127.0.0.1:${o.route}"`);
      writeFileSync(
        conf,
        natsConfig('127.0.0.1', p.client, join(dir, `js-${i}`)) +
          `server_name: node-${i}\nhttp_port: ${p.monitor}\n` +
          `cluster {\n  name: vab\n  listen: 127.0.0.1:${p.route}\n  routes: [${routes.join(', ')}]\n}\n`,
      );
      const args = opts.configFile
        ? [
            ...['-c', opts.configFile, '-a', '127.0.0.1', '-p', String(p.client), '-m', String(p.monitor)],
            ...['--cluster', `nats://127.0.0.1:${p.route}`, '--cluster_name', 'vab'],
            ...['--routes', routes.map((r) => r.replaceAll('"', '')).join(',')],
          ]
        : ['-c', conf];
      const server = new LocalProcessServer(
        p.client,
        `nats://127.0.0.1:${p.client}`,
        'nats-server',
        args,
        () => tcpProbe(p.client, undefined, 'INFO'),
        () => undefined,
        { NATS_NODE_NAME: `node-${i}`, NATS_JETSTREAM_DIR: join(dir, `js-${i}`), ...opts.env },
      );
      await server.start();
      nodes.push({ host: '127.0.0.1', port: p.client, url: server.url, server });
    }
    const monitorOf = new Map(nodes.map((n, i) => [n, ports[i]!.monitor]));
    const cluster: LocalNatsCluster = {
      nodes,
      urls: nodes.map((n) => n.url).join(','),
      async routed(timeoutMs = 15_000) {
        await waitFor(
          'nats cluster routes',
          async () => {
            const alive = [];
            for (const n of nodes) {
              try {
                const r = await fetch(`http://127.0.0.1:${monitorOf.get(n)}/routez`);
                alive.push(((await r.json()) as { num_routes: number }).num_routes);
              } catch {
                // a stopped node
              }
            }
            return alive.length > 0 && alive.every((routes) => routes >= alive.length - 1);
          },
          timeoutMs,
        );
      },
      dispose,
    };
    await cluster.routed();
    return cluster;
  } catch (err) {
    await dispose();
    throw err;
  }
}
