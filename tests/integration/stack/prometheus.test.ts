import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  freePort,
  fullFlow,
  hasBinary,
  startNats,
  startRedis,
  stopOnExit,
  waitFor,
  withNode,
  type DisposableServer,
} from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse, stringify } from 'yaml';
import { clinicScript, startOpenAiStub } from '../../../services/playground/test/openai-stub.js';
import {
  requireBuilt,
  SERVICES,
  spawnService,
  untilStackReady,
  type ServiceProcess,
} from '../../helpers/processes.js';

// A real Prometheus (Debian's `prometheus`) scrapes a running stack of real processes with the repository's
// own scrape configuration (deploy/prometheus.yml: its jobs, with this test's ports and a 1 s interval) and
// loads its alert rules (deploy/alerts.yml); PromQL over its HTTP API then sees what an operator would.
const root = join(import.meta.dirname, '..', '..', '..');
const KEY = 'sk-test-never-in-a-metric-0123456789';
const haveProm = hasBinary('prometheus');

interface ScrapeConfig {
  global: Record<string, unknown>;
  rule_files: string[];
  scrape_configs: Record<string, unknown>[];
}

describe('promtool', () => {
  it.skipIf(!hasBinary('promtool'))('finds the alert rules and the scrape configuration valid', () => {
    for (const args of [
      ['check', 'rules', join(root, 'deploy', 'alerts.yml')],
      ['check', 'config', join(root, 'deploy', 'prometheus.yml')],
    ]) {
      const r = spawnSync('promtool', args, { encoding: 'utf8' });
      expect(r.status, `${args.join(' ')}:\n${r.stdout}${r.stderr}`).toBe(0);
    }
  });
});

describe.skipIf(!haveProm)('Prometheus scraping the stack', () => {
  beforeAll(requireBuilt);
  let nats: DisposableServer;
  let redis: DisposableServer;
  let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
  const procs: ServiceProcess[] = [];
  let prometheus: ChildProcess | undefined;
  let promDir = '';
  let promUrl = '';
  let base = '';
  const ports: Record<string, number> = {};

  beforeAll(async () => {
    [nats, redis, stub] = await Promise.all([startNats(), startRedis(), startOpenAiStub(clinicScript)]);
    for (const job of ['gateway', 'agents', 'sessions', 'playground', 'webhooks', 'telephony'])
      ports[job] = await freePort();
    const common = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn', METRICS_HOST: '127.0.0.1' };
    for (const svc of ['agents', 'sessions', 'playground', 'webhooks', 'telephony'] as const) {
      procs.push(
        spawnService(svc, {
          ...common,
          METRICS_PORT: String(ports[svc]),
          ...(svc === 'playground' ? { FLOW_EGRESS_ALLOW: '127.0.0.1', ENV_FILE: '/nonexistent/.env' } : {}),
          ...(svc === 'webhooks' ? { WEBHOOK_SECRETS_KEY: '07'.repeat(32) } : {}),
          ...(svc === 'telephony'
            ? {
                TELEPHONY_PORT: String(await freePort()),
                TELEPHONY_HOST: '127.0.0.1',
                TWILIO_AUTH_TOKEN: 'prom-test',
              }
            : {}),
        }),
      );
    }
    procs.push(spawnService('gateway', { ...common, PORT: String(ports.gateway), HOST: '127.0.0.1' }));
    base = `http://127.0.0.1:${ports.gateway}`;
    // the hook's own bound less Prometheus' start: a playground took over 10 s to start at load average 30
    await untilStackReady(base, procs, 80_000);

    // the repository's configuration, each job pointed at this test's port, scraped every second
    const config = parse(readFileSync(join(root, 'deploy', 'prometheus.yml'), 'utf8')) as ScrapeConfig;
    config.global = {
      ...config.global,
      scrape_interval: '1s',
      scrape_timeout: '900ms',
      evaluation_interval: '1s',
    };
    config.rule_files = [join(root, 'deploy', 'alerts.yml')];
    for (const job of config.scrape_configs) {
      delete job.dns_sd_configs;
      job.static_configs = [{ targets: [`127.0.0.1:${ports[job.job_name as string]}`] }];
    }
    promDir = mkdtempSync(join(tmpdir(), 'vab-prom-'));
    writeFileSync(join(promDir, 'prometheus.yml'), stringify(config));
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    prometheus = stopOnExit(
      spawn(
        'prometheus',
        [
          `--config.file=${join(promDir, 'prometheus.yml')}`,
          `--storage.tsdb.path=${join(promDir, 'data')}`,
          `--web.listen-address=127.0.0.1:${promPort}`,
        ],
        { stdio: 'ignore' },
      ),
    );
    await waitFor(
      'prometheus',
      async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.ok ?? false,
      30_000,
    );
  }, 120_000);

  afterAll(async () => {
    prometheus?.kill('SIGTERM');
    for (const p of procs) p.child.kill('SIGTERM');
    await Promise.all(procs.map((p) => p.exited));
    await Promise.all([nats?.dispose(), redis?.dispose(), stub?.close()]);
    if (promDir) rmSync(promDir, { recursive: true, force: true });
  });

  async function query(
    promql: string,
  ): Promise<{ metric: Record<string, string>; value: [number, string] }[]> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`);
    const body = (await res.json()) as {
      status: string;
      data: { result: { metric: Record<string, string>; value: [number, string] }[] };
    };
    expect(body.status).toBe('success');
    return body.data.result;
  }

  /** Polls a query until `ok` holds for its result (a scrape a second, a rate needs two). */
  function eventually<T>(
    promql: string,
    ok: (r: Awaited<ReturnType<typeof query>>) => T | undefined,
  ): Promise<T> {
    return vi.waitFor(
      async () => {
        const result = await query(promql);
        const found = ok(result);
        if (found === undefined) throw new Error(`no result for ${promql}: ${JSON.stringify(result)}`);
        return found;
      },
      { timeout: 30_000, interval: 500 },
    );
  }

  it('answers the request rate of a route and the active text sessions, every target up', async () => {
    const flow = withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' });
    const created = await fetch(`${base}/api/agents`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Metrics', flow }),
    });
    expect(created.status).toBe(201);
    const agentId = ((await created.json()) as { id: string }).id;
    const started = await fetch(`${base}/api/agents/${agentId}/text-sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiKeys: { openai: KEY } }),
    });
    expect(started.status).toBe(201);
    const { sessionId } = (await started.json()) as { sessionId: string };
    // one turn: a model call, and the turn's figures
    const turn = await fetch(`${base}/api/agents/${agentId}/text-sessions/${sessionId}/turns`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'Hi' }),
    });
    expect(turn.status).toBe(200);

    // a steady trickle on one route while Prometheus scrapes
    let load = true;
    const trickle = (async () => {
      while (load) {
        await fetch(`${base}/api/agents/${agentId}`).then((r) => r.arrayBuffer());
        // the load's pace (20 requests a second), not a wait for anything
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      const rate = await eventually(
        'sum(rate(http_server_request_duration_seconds_count{http_route="/api/agents/:id",http_request_method="GET",http_response_status_code="200"}[5s]))',
        (r) => (r[0] && Number(r[0].value[1]) > 1 ? Number(r[0].value[1]) : undefined),
      );
      // ~one request per 50 ms plus its own time: a few per second, not hundreds
      expect(rate).toBeGreaterThan(1);
      expect(rate).toBeLessThan(40);
      const active = await eventually('sum(playground_sessions_active{session_type="text"})', (r) =>
        r[0] && Number(r[0].value[1]) >= 1 ? Number(r[0].value[1]) : undefined,
      );
      expect(active).toBe(1);
      const up = await eventually('up', (r) =>
        r.length === SERVICES.length && r.every((s) => s.value[1] === '1') ? r : undefined,
      );
      expect(up.map((s) => s.metric.job).sort()).toEqual(SERVICES);
      // the bus on both sides and Redis under it, each with bounded labels
      const served = await query(
        'sum by (subject) (bus_server_request_duration_seconds_count{job="agents"})',
      );
      expect(served.map((s) => s.metric.subject)).toContain('agents.get');
      const commands = await query('sum by (command) (redis_command_duration_seconds_count{job="agents"})');
      expect(commands.length).toBeGreaterThan(0);
      const deps = await query('dependency_up');
      expect(
        deps
          .filter((d) => d.value[1] === '1')
          .map((d) => `${d.metric.job}/${d.metric.dependency}`)
          .sort(),
      ).toEqual([
        'agents/nats',
        'agents/redis',
        'playground/nats',
        'playground/redis',
        'sessions/nats',
        'sessions/redis',
        'telephony/nats',
        'telephony/redis',
        'webhooks/nats',
        'webhooks/redis',
      ]);
      // the model call of the turn (a provider the table does not know: `other`)
      const model = await query('sum by (kind, provider) (playground_model_call_duration_seconds_count)');
      expect(model.map((m) => m.metric)).toContainEqual({ kind: 'llm', provider: 'other' });
      const turns = await query(
        'sum by (figure) (playground_turn_figure_seconds_count{session_type="text"})',
      );
      expect(turns.map((t) => t.metric.figure)).toEqual(expect.arrayContaining(['turn', 'llm_ttft']));
    } finally {
      load = false;
      await trickle;
    }

    // the rules are loaded; no id and no key in any series Prometheus holds
    const rules = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as {
      data: { groups: { rules: unknown[] }[] };
    };
    expect(rules.data.groups[0]!.rules.length).toBe(8);
    const series = await (await fetch(`${promUrl}/api/v1/label/__name__/values`)).text();
    expect(series).toContain('playground_turn_figure_seconds_bucket');
    for (const job of ['gateway', 'agents', 'sessions', 'playground', 'webhooks', 'telephony']) {
      const all = await (
        await fetch(`${promUrl}/api/v1/series?match[]=${encodeURIComponent(`{job="${job}"}`)}`)
      ).text();
      expect(all).not.toContain(agentId);
      expect(all).not.toContain(sessionId);
      expect(all).not.toContain(KEY);
    }
  }, 90_000);
});
