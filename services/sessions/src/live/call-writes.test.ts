import { AppError, type DeployRecord } from '@vab/contracts';
import { Redis } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { SessionsStore } from '../store.js';
import { CallsStore } from './calls-store.js';
import { redisStores } from '../../test/redis-stores.js';

/**
 * A call's record is written whole by its end and by its recording's store, and the two come from different
 * places at about the same moment (the playground seals the recording as the call ends): neither may undo the
 * other, and neither may bring back a call erased meanwhile. Real redis-server; the writes race on one
 * connection, as they do in the service.
 */

const stores = redisStores();
let redis: Redis;
let store: SessionsStore;
let calls: CallsStore;
let deploy: DeployRecord;
const agentId = `agent-${randomUUID()}`;

beforeAll(async () => {
  ({ redis, store, calls } = stores);
  const made = await store.createDeploy(agentId, 1, agentId);
  await store.updateDeploy(agentId, made.id, 'building');
  await store.updateDeploy(agentId, made.id, 'live');
  deploy = await store.getDeploy(agentId, made.id);
});

const recording = { durationMs: 4000, bytes: 32_000, startedAt: Date.now() };

async function newCall() {
  const callId = randomUUID();
  await calls.create({ agentId, callId, deploy, channel: 'web', caller: {} });
  return callId;
}
const end = (callId: string) =>
  calls.end({ agentId, callId, endedAt: Date.now(), endedReason: 'caller_hung_up', usage: [] });

describe('a call ended while its recording is stored', () => {
  it.each([
    [
      'the end asked first',
      (callId: string) => [end(callId), calls.setRecording(agentId, callId, recording)],
    ],
    [
      'the recording asked first',
      (callId: string) => [calls.setRecording(agentId, callId, recording), end(callId)],
    ],
  ])('keeps both, %s', async (_order, race) => {
    const ids = await Promise.all(Array.from({ length: 20 }, newCall));
    await Promise.all(ids.flatMap(race));
    for (const callId of ids) {
      const call = await calls.get(agentId, callId);
      expect({ status: call.status, endedReason: call.endedReason, recording: call.recording }).toEqual({
        status: 'ended',
        endedReason: 'caller_hung_up',
        recording,
      });
    }
  });

  it('does not bring back a call erased meanwhile', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, newCall));
    // an erasure is of an ended call (an active one is refused); its recording may still be on its way
    await Promise.all(ids.map(end));
    const results = await Promise.allSettled(
      ids.flatMap((callId) => [calls.setRecording(agentId, callId, recording), calls.erase(agentId, callId)]),
    );
    for (const r of results) {
      if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(AppError);
    }
    for (const callId of ids) {
      await expect(calls.get(agentId, callId)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    }
  });

  it('names a recording stored while the call is erased, so that it is deleted with it', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, newCall));
    await Promise.all(ids.map(end));
    // the recording's read goes first: an erasure that read the record apart from its delete read it before
    // the recording's write, and named no recording while it deleted a record that had one
    const results = await Promise.all(
      ids.map(async (callId) => {
        const [stored, erased] = await Promise.allSettled([
          calls.setRecording(agentId, callId, recording),
          calls.erase(agentId, callId),
        ]);
        if (erased.status === 'rejected') throw erased.reason;
        return { stored: stored.status === 'fulfilled', named: erased.value.recording !== null };
      }),
    );
    // whatever was stored is named by the erasure (the recording object is removed by what it names)
    for (const r of results) expect(r.named).toBe(r.stored);
  });

  it('refuses to erase a call still going on, and keeps it', async () => {
    const callId = await newCall();
    await expect(calls.erase(agentId, callId)).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(await calls.get(agentId, callId)).toMatchObject({ status: 'active' });
    await expect(calls.erase(agentId, randomUUID())).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('keeps a call it could not end in the open index, so that the owner sweep ends it later', async () => {
    const callId = await newCall();
    // another write of the record comes before each of the end's writes (a recording stored again and again)
    const scripts = redis as unknown as { ssEndCall(...a: string[]): Promise<string> };
    const write = scripts.ssEndCall.bind(redis);
    let bytes = 0;
    scripts.ssEndCall = async (...a: string[]) => {
      await calls.setRecording(agentId, callId, { ...recording, bytes: ++bytes });
      return write(...a);
    };
    try {
      await expect(end(callId)).rejects.toMatchObject({ code: 'CONFLICT' });
    } finally {
      scripts.ssEndCall = write;
    }
    expect(await calls.get(agentId, callId)).toMatchObject({ status: 'active' });
    const open = await calls.openCallsBefore(Date.now() + 1, 10_000);
    expect(open).toContainEqual({ agentId, callId });
    // ended at last: out of the index
    await end(callId);
    expect(await calls.openCallsBefore(Date.now() + 1, 10_000)).not.toContainEqual({ agentId, callId });
  });

  it('ends a call whose slots could not be given back at once: the owner sweep gives them back', async () => {
    const callId = await newCall();
    // Redis away for the first command that gives a slot back, after the record was written ended
    const patched = redis as unknown as { zrem(...a: unknown[]): Promise<number> };
    const zrem = patched.zrem.bind(redis);
    patched.zrem = async () => {
      patched.zrem = zrem;
      throw new Error('Connection is closed.');
    };
    try {
      expect(await end(callId)).toMatchObject({ status: 'ended', endedReason: 'caller_hung_up' });
    } finally {
      patched.zrem = zrem;
    }
    // still in the open index: the owner sweep's end finds it ended and gives its slots back
    expect(await calls.openCallsBefore(Date.now() + 1, 10_000)).toContainEqual({ agentId, callId });
    expect(await end(callId)).toBeNull();
    expect(await calls.openCallsBefore(Date.now() + 1, 10_000)).not.toContainEqual({ agentId, callId });
  });
});
