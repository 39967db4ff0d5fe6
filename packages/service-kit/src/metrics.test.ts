import { busObserver, connectNats, serve, BusClient, type HandlerTable } from '@vab/bus';
import { Subjects } from '@vab/contracts';
import { createRedis } from '@vab/storage';
import { startNats, startRedis, type DisposableServer } from '@vab/testkit';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  commandLabel,
  instrumentProcess,
  loadConfig,
  methodLabel,
  MetricsEnv,
  outcomeLabel,
  subjectLabel,
} from './index.js';

const log = pino({ level: 'silent' });

describe('labels stay bounded', () => {
  it('keeps contract subjects and replaces a per-session key by *', () => {
    expect(subjectLabel(Subjects.agentsGet)).toBe('agents.get');
    expect(subjectLabel('playground.owner.ts_01HZX3.turn')).toBe('playground.owner.*.turn');
    expect(subjectLabel('playground.owner.vab-pg-room-9.end')).toBe('playground.owner.*.end');
    expect(subjectLabel('playground.live.ts_01HZX3')).toBe('playground.live.*');
    expect(subjectLabel('agents.get.extra')).toBe('other');
    expect(subjectLabel('_INBOX.abc')).toBe('other');
  });

  it('an outcome is ok or an error code of the contracts', () => {
    expect(outcomeLabel('ok')).toBe('ok');
    expect(outcomeLabel('NOT_FOUND')).toBe('NOT_FOUND');
    expect(outcomeLabel('sk-live-123 went wrong')).toBe('INTERNAL');
  });

  it('a method outside HTTP’s own is _OTHER; a command name is lower-case or other', () => {
    expect(methodLabel('PATCH')).toBe('PATCH');
    expect(methodLabel('BREW')).toBe('_OTHER');
    expect(commandLabel('EVALSHA')).toBe('evalsha');
    expect(commandLabel(undefined)).toBe('other');
    expect(commandLabel('x'.repeat(64))).toBe('other');
  });
});

describe('METRICS_PORT', () => {
  it('unset or empty: off; a port: that port; anything else stops the start naming it', () => {
    expect(loadConfig(MetricsEnv, {}).METRICS_PORT).toBeUndefined();
    expect(loadConfig(MetricsEnv, { METRICS_PORT: '' }).METRICS_PORT).toBeUndefined();
    expect(loadConfig(MetricsEnv, { METRICS_PORT: '0' }).METRICS_PORT).toBe(0);
    expect(loadConfig(MetricsEnv, { METRICS_PORT: '9464' }).METRICS_PORT).toBe(9464);
    for (const bad of ['abc', '70000', '-1', '1.5']) {
      expect(() => loadConfig(MetricsEnv, { METRICS_PORT: bad })).toThrow(
        /^invalid configuration: METRICS_PORT must be a port number \(0–65535\)$/,
      );
    }
  });
});

describe('the process metrics, fed by real NATS and Redis', () => {
  let nats: DisposableServer;
  let redisServer: DisposableServer;
  beforeAll(async () => {
    [nats, redisServer] = await Promise.all([startNats(), startRedis()]);
  });
  afterAll(async () => {
    await Promise.all([nats.dispose(), redisServer.dispose()]);
  });

  it('times bus requests on both sides by subject and outcome, and Redis commands by name', async () => {
    const { registry } = instrumentProcess();
    const nc = await connectNats({ url: nats.url, name: 'metrics-test', service: 'agents' }, log);
    const redis = createRedis(redisServer.url, log, { name: 'metrics-test' });
    try {
      const handlers = {
        'agents.health': async () => {
          await redis.hgetall('metrics-test:{x}');
          return { service: 'agents', ok: true };
        },
      } as unknown as HandlerTable<'agents'>;
      const served = serve(nc, { service: 'agents', handlers, log });
      await served.ready;
      const bus = new BusClient(nc);
      // twice: the second finds its series kept from the first
      await bus.request(Subjects.agentsHealth, {}, { timeoutMs: 2000, requestId: 'r1' });
      await bus.request(Subjects.agentsHealth, {}, { timeoutMs: 2000, requestId: 'r1b' });
      await redis.hset('metrics-test:{x}', 'f', '1');
      await expect(redis.incr('metrics-test:{x}')).rejects.toThrow(/WRONGTYPE/);
      // per-session subjects: one series under `*`, never one per session
      busObserver().server('playground.live.ts_1', 'ok', 0.001);
      busObserver().server('playground.live.ts_2', 'NOT_FOUND', 0.001);
      busObserver().server('playground.live.ts_3', 'NOT_FOUND', 0.001);
      await expect(
        bus.request(Subjects.agentsGet, { id: 'ag_1' } as never, { timeoutMs: 2000, requestId: 'r2' }),
      ).rejects.toThrow();
      await served.stop(1000);
      const text = await registry.metrics();
      expect(text).toContain(
        'bus_client_request_duration_seconds_count{subject="agents.health",outcome="ok"} 2',
      );
      expect(text).toContain(
        'bus_server_request_duration_seconds_count{subject="agents.health",outcome="ok"} 2',
      );
      expect(text).toContain(
        'bus_server_request_duration_seconds_count{subject="playground.live.*",outcome="ok"} 1',
      );
      expect(text).toContain(
        'bus_server_request_duration_seconds_count{subject="playground.live.*",outcome="NOT_FOUND"} 2',
      );
      expect(text).not.toMatch(/ts_[123]/);
      // nobody serves agents.get here: the client's outcome is the code the gateway would answer with
      expect(text).toMatch(
        /bus_client_request_duration_seconds_count\{subject="agents.get",outcome="SERVICE_UNAVAILABLE"\} 1/,
      );
      expect(text).toContain('redis_command_duration_seconds_count{command="hgetall",outcome="ok"} 2');
      expect(text).toContain('redis_command_duration_seconds_count{command="incr",outcome="error"} 1');
      // an outcome that never happened has no series
      expect(text).not.toContain('command="hgetall",outcome="error"');
      expect(text).not.toContain('command="incr",outcome="ok"');
      expect(text).toContain('process_cpu_user_seconds_total');
      // nothing of the request made it into a label
      expect(text).not.toContain('ag_1');
      expect(text).not.toContain('metrics-test');
    } finally {
      await nc.drain();
      redis.disconnect();
    }
  });
});
