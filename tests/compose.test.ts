import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KEY_ENV_VARS } from '@vab/playground';
import { BaseEnv, MetricsEnv, RedisEnv } from '@vab/service-kit';
import { SERVICES } from './helpers/processes.js';

// No Docker engine runs on these machines: this checks that docker-compose.yml and the Dockerfile agree
// with the code, so the compose stack is not left to rot.
const root = join(import.meta.dirname, '..');
// merge keys (`<<: *otel`) resolved, as compose resolves them
const compose = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    {
      build?: { args?: { SERVICE?: string } };
      environment?: Record<string, string>;
      ports?: string[];
      volumes?: string[];
      healthcheck?: unknown;
    }
  >;
  volumes?: Record<string, unknown>;
};

describe('docker-compose.yml', () => {
  const built = Object.entries(compose.services).filter(([, s]) => s.build);

  it('has NATS, Redis with append-only persistence on a volume, LiveKit, and every service', () => {
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(['nats', 'redis', 'livekit', 'agents', 'sessions', 'gateway']),
    );
    expect(JSON.stringify(compose.services.redis)).toContain('--appendonly');
    expect(compose.services.redis!.volumes?.[0]).toMatch(/^redis-data:/);
    expect(compose.volumes).toHaveProperty('redis-data');
    const services = readdirServices();
    expect(built.map(([, s]) => s.build?.args?.SERVICE).sort()).toEqual(services.sort());
  });

  it('names only env vars each service reads in its config.ts, and publishes only the two edges', () => {
    for (const [name, svc] of built) {
      const service = svc.build?.args?.SERVICE ?? name;
      const config = readFileSync(join(root, 'services', service, 'src', 'config.ts'), 'utf8');
      for (const key of Object.keys(svc.environment ?? {})) {
        // every service reads the service kit's base (and Redis) variables; the playground also the provider
        // key variables its provider table names
        if (key in BaseEnv.shape || key in RedisEnv) continue;
        // the services' metrics listener (the gateway serves /metrics on its own port)
        if (service !== 'gateway' && key in MetricsEnv) {
          expect(config, `${service} takes the metrics settings`).toContain('...MetricsEnv');
          continue;
        }
        if (service === 'playground' && KEY_ENV_VARS.includes(key)) continue;
        expect(config, `${service} reads ${key}`).toMatch(new RegExp(`\\b${key}\\b`));
      }
      expect(existsSync(join(root, 'services', service, 'src', 'main.ts'))).toBe(true);
      // telephony is Twilio's edge (webhooks, Media Streams) on its own port; the gateway the API's
      if (name === 'telephony') {
        const port = svc.environment?.TELEPHONY_PORT;
        expect(svc.ports).toEqual([`${port}:${port}`]);
      } else if (name !== 'gateway') expect(svc.ports).toBeUndefined();
    }
    const gw = compose.services.gateway!;
    expect(gw.ports).toEqual([`${gw.environment?.PORT}:${gw.environment?.PORT}`]);
    expect(gw.healthcheck).toBeDefined();
  });

  it('gives each operator secret of the live and phone work, from .env, as docs/operations.md says', () => {
    const raw = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    const operations = readFileSync(join(root, 'docs', 'operations.md'), 'utf8');
    const secrets: [service: string, name: string, valid: (laptopDefault: string) => boolean][] = [
      // decision 0033: at least 32 characters, the same on every gateway
      ['gateway', 'CALLER_HASH_KEY', (v) => v.length >= 32],
      // 32 bytes as 64 hex digits (or base64)
      ['playground', 'CREDENTIALS_KEY', (v) => /^[0-9a-f]{64}$/i.test(v)],
      ['playground', 'CREDENTIALS_OLD_KEYS', (v) => v === ''],
      ['telephony', 'TWILIO_AUTH_TOKEN', (v) => v.length > 0],
      ['webhooks', 'WEBHOOK_SECRETS_KEY', (v) => /^[0-9a-f]{64}$/i.test(v)],
    ];
    for (const [service, name, valid] of secrets) {
      const value = compose.services[service]?.environment?.[name];
      // an operator's .env sets it (compose reads ${NAME:-default} from it); the default only serves a laptop
      const form = new RegExp(`^\\$\\{${name}:-(.*)\\}$`).exec(value ?? '');
      expect(form, `${service} takes ${name} from .env`).not.toBeNull();
      expect(valid(form![1]!), `${name}'s laptop default is one its config.ts accepts`).toBe(true);
      expect(operations, `docs/operations.md documents ${name} under compose`).toMatch(
        new RegExp(`Under compose: [^.]*\\b${name}\\b`),
      );
    }
    // the header tells an operator which keys to set before exposing anything
    const header = raw.slice(0, raw.indexOf('\nname:'));
    for (const [, name] of secrets.filter(([, n]) => !n.endsWith('_OLD_KEYS')))
      expect(header, `the header names ${name}`).toContain(name);
  });

  it("takes telephony's behind-the-proxy settings from .env, under the names docs/operations.md gives", () => {
    const operations = readFileSync(join(root, 'docs', 'operations.md'), 'utf8');
    const telephony = compose.services.telephony!.environment ?? {};
    // behind the TLS proxy every connection is the proxy's: a cap an operator cannot lift refuses real calls
    for (const name of ['TRUST_PROXY', 'MAX_CONNECTIONS_PER_ADDRESS']) {
      const form = new RegExp(`^\\$\\{(TELEPHONY_${name}):-(.*)\\}$`).exec(telephony[name] ?? '');
      expect(form, `telephony takes ${name} from .env`).not.toBeNull();
      expect(operations, `docs/operations.md names ${form![1]} under compose`).toMatch(
        new RegExp(`Under compose: [^.]*\\b${form![1]}\\b`),
      );
    }
  });

  it("pins every image to a version, the Dockerfile's base too", () => {
    const full = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
      services: Record<string, { image?: string }>;
    };
    const images = Object.values(full.services).flatMap((svc) => (svc.image ? [svc.image] : []));
    const bases = [...readFileSync(join(root, 'Dockerfile'), 'utf8').matchAll(/^FROM (\S+)/gm)].map(
      (m) => m[1]!,
    );
    for (const image of [...images, ...bases]) expect(image).toMatch(/:v?\d+\.\d+\.\d+(-[a-z0-9.-]+)?$/);
  });

  it('has a cluster profile: 3 NATS nodes on the cluster variant, 6 Redis Cluster nodes, services pointed there', () => {
    const full = parse(readFileSync(join(root, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
      services: Record<string, { profiles?: string[]; command?: string[] | string; image?: string }>;
    };
    const inProfile = Object.entries(full.services).filter(([, svc]) => svc.profiles?.includes('cluster'));
    const nats = inProfile.filter(([, svc]) => svc.image?.startsWith('nats:'));
    const redis = inProfile.filter(([, svc]) => JSON.stringify(svc.command).includes('--cluster-enabled'));
    expect(nats.map(([n]) => n)).toEqual(['nats-1', 'nats-2', 'nats-3']);
    for (const [, svc] of nats) expect(svc.command).toEqual(['-c', '/etc/nats/nats-cluster.conf']);
    expect(redis).toHaveLength(6);
    const env = readFileSync(join(root, 'deploy', 'cluster.env'), 'utf8');
    expect(env).toContain('NATS_URL=nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222');
    expect(env).toMatch(/REDIS_CLUSTER_NODES=redis-1:6379,.*redis-6:6379/);
    for (const svc of ['agents', 'sessions', 'playground']) {
      expect(compose.services[svc]!.environment?.REDIS_CLUSTER_NODES).toBe('${REDIS_CLUSTER_NODES:-}');
    }
  });

  it('has Prometheus on the repository’s scrape configuration and rules, scraping each service’s METRICS_PORT', () => {
    const prometheus = compose.services.prometheus!;
    expect(prometheus.volumes).toEqual(
      expect.arrayContaining([
        './deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro',
        './deploy/alerts.yml:/etc/prometheus/alerts.yml:ro',
      ]),
    );
    const scrape = parse(readFileSync(join(root, 'deploy', 'prometheus.yml'), 'utf8')) as {
      rule_files: string[];
      scrape_configs: { job_name: string; dns_sd_configs: { names: string[]; port: number }[] }[];
    };
    expect(scrape.rule_files).toEqual(['alerts.yml']);
    const jobs = Object.fromEntries(
      scrape.scrape_configs.map((j) => [j.job_name, j.dns_sd_configs[0]!] as const),
    );
    expect(Object.keys(jobs).sort()).toEqual(SERVICES);
    expect(jobs.gateway!.port).toBe(Number(compose.services.gateway!.environment?.PORT));
    for (const svc of ['agents', 'sessions', 'playground', 'webhooks', 'telephony']) {
      expect(jobs[svc]!.names).toEqual([svc]);
      expect(jobs[svc]!.port).toBe(Number(compose.services[svc]!.environment?.METRICS_PORT));
      expect(compose.services[svc]!.environment?.METRICS_HOST).toBe('0.0.0.0');
    }
  });

  it('points at files that exist', () => {
    expect(existsSync(join(root, 'Dockerfile'))).toBe(true);
    expect(existsSync(join(root, 'deploy', 'nats.conf'))).toBe(true);
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toContain('services/${SERVICE}/dist/main.js');
  });
});

function readdirServices(): string[] {
  return readdirSync(join(root, 'services')).filter((s) =>
    existsSync(join(root, 'services', s, 'package.json')),
  );
}
