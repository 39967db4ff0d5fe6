import { jetstreamManager } from '@nats-io/jetstream';

import {
  DOMAIN_EVENTS_STREAM,
  DOMAIN_EVENTS_SUBJECTS,
  Subjects,
  type DeployRecord,
  type DomainEvent,
} from '@vab/contracts';
import { describe, expect, it, vi } from 'vitest';
import { deployHarness } from '../../helpers/deploys.js';
import { keysMatching } from '../../helpers/stack.js';

/**
 * A deploy transition no sessions instance's memory is trusted with (the deploy sweep): a canary whose window
 * ends while no instance that knew of it runs is promoted all the same, and a deploy whose instance died in
 * the middle of its pipeline does not stay `building` forever — it fails, saying to deploy again; a canary
 * gone worse is rolled back though no instance checks it; a move whose event the stream did not take is
 * announced again, once.
 */

const d = deployHarness();

/** The agent's events the stream DOMAIN_EVENTS holds. */
async function stored(agentId: string): Promise<DomainEvent[]> {
  const jsm = await jetstreamManager(d.nc);
  const { state } = await jsm.streams.info(DOMAIN_EVENTS_STREAM);
  const out: DomainEvent[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(DOMAIN_EVENTS_STREAM, { seq }).catch(() => null);
    if (m?.subject.startsWith(`domain.${agentId}.`)) out.push(m.json<DomainEvent>());
  }
  return out;
}

describe('deploys across a sessions restart', () => {
  it('a canary whose window ends while its instance is gone is promoted by the sweep', async () => {
    const agentId = await d.agent('Window desk');
    const live = await d.deployed(agentId, {}, 'live');
    const canary = await d.deployed(agentId, { trafficPercent: 50, canaryWindowMs: 10_000 }, 'canary');
    const wentLive = d.eventsOf(agentId, 'deploy.live');

    // the instance that ran its pipeline stops (a restart): nothing of it remembers the window; the agent
    // takes no call that could look at it either
    await d.stack.services.sessions.stop();
    await d.stack.services.sessions.start();

    await d.settled(agentId, canary.id, 'live', 45_000);
    const promoted = await d.deployOf(agentId, canary.id);
    expect(promoted.promoted).toMatchObject({ by: 'window' });
    expect(promoted.promoted!.at).toBeGreaterThanOrEqual(canary.liveAt! + 10_000);
    expect(await d.deployOf(agentId, live.id)).toMatchObject({ status: 'superseded' });
    // the builder is told, once
    await vi.waitFor(() => expect(wentLive.seen).toHaveLength(1), { timeout: 10_000 });
    expect(wentLive.seen[0]!.data).toMatchObject({ deploy: { id: canary.id, status: 'live' } });
    wentLive.stop();
  }, 90_000);

  it('a deploy whose instance died mid-pipeline fails, saying to deploy again; the next one goes live', async () => {
    const agentId = await d.agent('Interrupted desk');
    const failed = d.eventsOf(agentId, 'deploy.failed');
    // the readiness check is taken by something that never answers: the pipeline waits in `building`
    await d.stack.services.playground.stop();
    const held = d.nc.subscribe(Subjects.deployCheck, { callback: () => undefined });
    try {
      const res = await d.http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, {});
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      await d.settled(agentId, res.body.id, 'building', 10_000);
      // its instance is killed mid-check, and another takes over
      await d.stack.services.sessions.crash();
      await d.stack.services.sessions.start();

      expect((await d.settled(agentId, res.body.id, 'failed')).failure).toMatchObject({
        reason: 'the deploy pipeline was interrupted; deploy again',
        issues: [{ code: 'INTERRUPTED', message: 'the deploy pipeline was interrupted; deploy again' }],
      });
      await vi.waitFor(() => expect(failed.seen).toHaveLength(1), { timeout: 10_000 });
      expect(failed.seen[0]!.data).toMatchObject({ deploy: { id: res.body.id, status: 'failed' } });
    } finally {
      held.unsubscribe();
      failed.stop();
      await d.stack.services.playground.start();
    }
    // deploying again works as ever
    await d.deployed(agentId, {}, 'live');
  }, 90_000);

  it('a canary without a window gone worse is rolled back by the sweep when the instance that ended its calls died', async () => {
    const agentId = await d.agent('Worse desk');
    const live = await d.deployed(agentId, {}, 'live');
    const canary = await d.deployed(agentId, { trafficPercent: 50 }, 'canary');
    expect(await d.stack.redis.zscore('ss:{deploys}:canaries', `${agentId}/${canary.id}`)).not.toBeNull();
    const rolledBack = d.eventsOf(agentId, 'deploy.rolled_back');
    // the calls are closed and analysed as the sessions instance that hosted them does, but no check of the
    // canary follows (that instance died right after): the store's own code, under the API
    await d.closedCalls(canary, 20, 4);
    await d.closedCalls(live, 20, 20);

    expect((await d.settled(agentId, canary.id, 'rolled_back')).rollback).toMatchObject({
      rule: 'success_rate',
      canary: { judged: 20, passed: 4 },
      live: { judged: 20, passed: 20 },
    });
    expect(await d.deployOf(agentId, live.id)).toMatchObject({ status: 'live' });
    await vi.waitFor(() => expect(rolledBack.seen).toHaveLength(1), { timeout: 10_000 });
    expect(rolledBack.seen[0]!.data).toMatchObject({ deploy: { id: canary.id, status: 'rolled_back' } });
    // its end announced, it leaves the index, and its figures go with it
    await expect
      .poll(() => d.stack.redis.zscore('ss:{deploys}:canaries', `${agentId}/${canary.id}`), {
        timeout: 10_000,
      })
      .toBeNull();
    expect(await keysMatching(d.stack.redis, `ss:{${agentId}}:cj*`)).toEqual([]);
    rolledBack.stop();
  }, 90_000);

  it("an external deployer's PATCH retried after its canary ended leaves nothing for the sweep to tell again", async () => {
    const agentId = await d.agent('Retrying desk');
    await d.deployed(agentId, {}, 'live');
    const made = (
      await d.http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, {
        external: true,
        trafficPercent: 50,
      })
    ).body;
    const member = `${agentId}/${made.id}`;
    const patch = (status: string) => d.http.patch(`/api/agents/${agentId}/deploys/${made.id}`, { status });
    expect((await patch('building')).status).toBe(200);
    expect((await patch('live')).body.status).toBe('canary');
    // live on a canary: its promotion, which takes it out of the index
    expect((await patch('live')).body).toMatchObject({ status: 'live', promoted: { by: 'hand' } });
    await expect
      .poll(() => d.stack.redis.zscore('ss:{deploys}:canaries', member), { timeout: 10_000 })
      .toBeNull();
    // the deployer did not get the answer and asks again: refused (a share's live is a move to canary), and
    // no entry is left behind that the sweep would announce again
    const again = await patch('live');
    expect(again.body.code).toBe('ILLEGAL_TRANSITION');
    expect(await d.stack.redis.zscore('ss:{deploys}:canaries', member)).toBeNull();
  }, 60_000);

  // last: it takes the events stream away for a while
  it('a move whose event the stream did not take is published again by the sweep, once', async () => {
    const agentId = await d.agent('Unannounced desk');
    const jsm = await jetstreamManager(d.nc);
    // JetStream loses the stream (an outage of its own): the deploy goes live, its event is not stored
    await jsm.streams.delete(DOMAIN_EVENTS_STREAM);
    const live = await d.deployed(agentId, {}, 'live');
    await vi.waitFor(
      () =>
        expect(
          d.stack.logs.some((l) => l.includes('DOMAIN_EVENT_NOT_PUBLISHED') && l.includes(agentId)),
        ).toBe(true),
      { timeout: 10_000 },
    );
    await jsm.streams.add({ name: DOMAIN_EVENTS_STREAM, subjects: [DOMAIN_EVENTS_SUBJECTS] });

    await expect
      .poll(async () => (await stored(agentId)).map((e) => `${e.type} ${e.id}`), { timeout: 30_000 })
      .toEqual([`deploy.live ${live.id}_live`]);
    expect((await stored(agentId))[0]!.data).toMatchObject({ deploy: { id: live.id, status: 'live' } });
    // and only once: the next passes have nothing left to tell
    await d.stack.services.sessions.sessions!.deploySweep.sweep(Date.now() + 60_000);
    expect(await stored(agentId)).toHaveLength(1);
  }, 90_000);
});
