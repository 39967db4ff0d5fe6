import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { DeployRecord, DomainEvent } from '@vab/contracts';
import { CallsStore } from '@vab/sessions';
import { voiceFlow } from '@vab/testkit';
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect } from 'vitest';
import { api, startStack, type Stack } from './stack.js';

/** A voice flow whose models answer nowhere: a deploy of it goes live; no call of it is made. */
export const deployableFlow = voiceFlow({
  chatURL: 'http://127.0.0.1:9/v1',
  speechURL: 'http://127.0.0.1:9/v1',
});

/**
 * A stack whose deploy sweep runs every 250 ms with short bounds (the production ones are minutes), for the
 * tests that stop, crash and restart the sessions service under deploys; with what they read deploys by.
 */
export class DeployHarness {
  stack!: Stack;
  http!: ReturnType<typeof api>;
  nc!: NatsConnection;

  async start(): Promise<void> {
    this.stack = await startStack({
      playground: { CREDENTIALS_KEY: randomBytes(32).toString('hex') },
      deploys: { intervalMs: 250, interruptedAfterMs: 4_000, checkTimeoutMs: 2_000 },
    });
    this.http = api(this.stack.baseUrl);
    this.nc = await connect({ servers: this.stack.natsUrl });
  }

  async close(): Promise<void> {
    await this.nc?.close();
    await this.stack?.close();
  }

  /** A new agent of `deployableFlow`: its id. */
  async agent(name: string): Promise<string> {
    return (await this.http.post('/api/agents', { name, flow: deployableFlow })).body.id as string;
  }

  async deployOf(agentId: string, id: string): Promise<DeployRecord> {
    const all = (await this.http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body;
    return all.find((d) => d.id === id)!;
  }

  /** Waits until the deploy reaches `status` (by its pipeline, the sweep, a judge): the deploy then. */
  async settled(agentId: string, id: string, status: string, timeoutMs = 30_000): Promise<DeployRecord> {
    await expect
      .poll(async () => (await this.deployOf(agentId, id)).status, { timeout: timeoutMs, interval: 100 })
      .toBe(status);
    return this.deployOf(agentId, id);
  }

  /** Deploys with `body` and waits until the deploy reaches `status`. */
  async deployed(agentId: string, body: Record<string, unknown>, status: string): Promise<DeployRecord> {
    const res = await this.http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, body);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return this.settled(agentId, res.body.id, status);
  }

  /** The domain events of one type the agent's stream gets from now on. */
  eventsOf(agentId: string, type: string): { seen: DomainEvent[]; stop: () => void } {
    const seen: DomainEvent[] = [];
    const sub = this.nc.subscribe(`domain.${agentId}.${type}`, {
      callback: (_e, m) => void seen.push(m.json<DomainEvent>()),
    });
    return { seen, stop: () => sub.unsubscribe() };
  }

  /**
   * `count` calls of `deploy`, ended and analysed, the first `passing` of them successful, as the sessions
   * instance that hosted them writes them (the store's own code, under the API) with no canary check after.
   */
  async closedCalls(deploy: DeployRecord, count: number, passing: number): Promise<void> {
    const store = new CallsStore(this.stack.redis, 3);
    const { agentId } = deploy;
    for (let i = 0; i < count; i++) {
      const callId = randomUUID();
      await store.create({ agentId, callId, deploy, channel: 'web', caller: {} });
      await store.end({ agentId, callId, endedAt: Date.now(), endedReason: 'caller_hung_up', usage: [] });
      await store.setAnalysis({
        agentId,
        callId,
        jobId: randomUUID(),
        requestedAt: Date.now(),
        analysis: {
          summary: null,
          criteria: [],
          success: i < passing,
          data: {},
          model: { provider: 'test', model: 'test' },
          usage: [],
          at: Date.now(),
        },
      });
    }
  }
}

/** A DeployHarness started before the file's tests and closed after them (its fields are set once they run). */
export function deployHarness(): DeployHarness {
  const harness = new DeployHarness();
  beforeAll(() => harness.start(), 60_000);
  afterAll(() => harness.close());
  return harness;
}
