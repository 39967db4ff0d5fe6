import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import {
  RECORDING_DURATION_HEADER,
  RECORDING_STARTED_AT_HEADER,
  recordingChunksId,
  type DeployRecord,
} from '@vab/contracts';
import {
  clinicScript,
  decodeRecording,
  freePort,
  fullFlow,
  levelOf,
  speak,
  VoiceClient,
  withNode,
} from '@vab/testkit';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { joinCall, liveDeploy, startWebCall } from '../../helpers/live.js';
import { processSuite, requireBuilt, type Backends, type ServiceProcess } from '../../helpers/processes.js';
import { api } from '../../helpers/stack.js';

/**
 * Issue 50: sessions through overload and faults, on real processes (each instance measures its own load, so
 * each runs alone, as in production).
 */

const HOG = join(import.meta.dirname, '..', '..', 'helpers', 'event-loop-hog.mjs');
const suite = processSuite({ timeoutMs: 90_000 });
const { cleanup, start } = suite;

let watcher: NatsConnection;
let sessionsService: ServiceProcess;
let base: string;
let agentId: string;
let backends: Backends;
const KEY = 'sk-resilience-test-key-0123456789';
const DRAIN_GOODBYE = 'We are updating our systems, please call back in a minute. Goodbye.';

/**
 * An instance as the tests run it. Load-based admission off unless a test is about it: this machine is shared
 * (its load average is often ten times its cores), and an instance there rightly counts itself overloaded.
 */
const playgroundEnv = (extra: Record<string, string> = {}) => ({
  FLOW_EGRESS_ALLOW: '127.0.0.1',
  ENV_FILE: '/nonexistent/.env',
  MAX_SESSIONS_PER_CALLER: '0',
  LOAD_CHECK_INTERVAL_MS: '250',
  LOAD_MAX_EVENT_LOOP_P99_MS: '0',
  LOAD_MAX_BEHIND_MS: '0',
  LOAD_MAX_CPU_PERCENT: '0',
  ...extra,
});
/**
 * Admission by event-loop delay alone, at a threshold the hog's blocks pass by far and a busy shared machine
 * does not (the defaults are a dedicated 2-vCPU instance's: docs/operations.md).
 */
const BY_EVENT_LOOP = { LOAD_MAX_EVENT_LOOP_P99_MS: '400', HOG_BLOCK_MS: '700', HOG_EVERY_MS: '800' };

async function send(method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: (text ? JSON.parse(text) : {}) as Record<string, unknown>,
  };
}
const post = (path: string, body: unknown) => send('POST', path, body);
const get = (path: string) => send('GET', path);

/** Stops a process and waits for its exit code. */
async function stopped(p: ServiceProcess, signal: NodeJS.Signals): Promise<number | null> {
  p.child.kill(signal);
  return p.exited;
}

const startText = () => post(`/api/agents/${agentId}/text-sessions`, { apiKeys: { openai: 'key-123456' } });

/**
 * A start retried on 503 after its Retry-After, as clients do: an instance that measures itself loaded (its own
 * start-up on this shared machine, for a moment) refuses, and the next try finds it recovered.
 */
async function startTextRetrying() {
  let started = await startText();
  for (let tries = 0; started.status === 503 && tries < 30; tries++) {
    await new Promise((r) => setTimeout(r, 1000 * Number(started.headers.get('retry-after') ?? 1)));
    started = await startText();
  }
  return started;
}

/** The instance whose log says it started the session (its line may reach us after the answer). */
async function hostOf(sessionId: string, instances: ServiceProcess[]): Promise<number> {
  const find = () =>
    instances.findIndex((p) =>
      p
        .output()
        .split('\n')
        .some((l) => l.includes('"session started"') && l.includes(sessionId)),
    );
  await expect.poll(find, { timeout: 10_000, interval: 20 }).toBeGreaterThanOrEqual(0);
  return find();
}

/** What the instance has written of a recording to the bucket so far (decision 35): its zero and its length. */
async function recordedSoFar(agent: string, id: string): Promise<{ startedAt: number; durationMs: number }> {
  const jsm = await jetstreamManager(watcher);
  const last = await jsm.streams
    .getMessage('OBJ_recordings', { last_by_subj: `$O.recordings.C.${recordingChunksId(agent, id)}` })
    .catch(() => null);
  return {
    startedAt: Number(last?.header.get(RECORDING_STARTED_AT_HEADER) ?? 0),
    durationMs: Number(last?.header.get(RECORDING_DURATION_HEADER) ?? 0),
  };
}

/** Waits until what `instance` has written of the recording reaches `until` (epoch ms); its zero. */
async function recordingCovers(
  instance: ServiceProcess,
  agent: string,
  id: string,
  until: number,
): Promise<number> {
  const reached = async () => {
    const { startedAt, durationMs } = await recordedSoFar(agent, id);
    return startedAt > 0 ? startedAt + durationMs : 0;
  };
  await expect
    .poll(reached, { timeout: 30_000, interval: 200 })
    .toBeGreaterThan(until)
    .catch((err: unknown) => {
      console.log(
        instance
          .output()
          .split('\n')
          .filter((l) => /RECORD|record/.test(l))
          .join('\n'),
      );
      throw err;
    });
  return (await recordedSoFar(agent, id)).startedAt;
}

/**
 * A kept recording as a builder gets it at `path`: the stored bytes, a stereo Ogg Opus file as long as its
 * record says, the caller's speech on the left channel where it was said (`spoke` ms after its zero).
 */
async function expectPlayable(
  path: string,
  recording: { durationMs: number; bytes: number },
  spoke: number,
  spokeMs: number,
): Promise<void> {
  const res = await fetch(`${base}${path}`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('audio/ogg');
  const file = new Uint8Array(await res.arrayBuffer());
  expect(file.byteLength).toBe(recording.bytes);
  const decoded = await decodeRecording(file);
  expect(decoded.codec).toBe('opus');
  expect(decoded.channels).toBe(2);
  expect(Math.abs(decoded.durationMs - recording.durationMs)).toBeLessThanOrEqual(100);
  expect(levelOf(decoded.left, decoded.sampleRate, spoke + 100, spoke + spokeMs - 100)).toBeGreaterThan(500);
}

/** The session's stored events (its record's event stream, read to its end). */
const storedEvents = (agent: string, id: string) =>
  fetch(`${base}/api/agents/${agent}/test-sessions/${id}/events`).then((r) => r.text());

beforeAll(async () => {
  requireBuilt();
  backends = await suite.backends({ chat: clinicScript, transcribe: () => '' });
  watcher = await connect({ servers: backends.natsUrl });
  cleanup.push(() => watcher.close());
  await start('agents');
  // the owner sweep every 2 s: a lost session is closed a few seconds after its instance died
  sessionsService = await start('sessions', {
    OWNER_SWEEP_INTERVAL_MS: '2000',
    OWNER_SWEEP_GRACE_MS: '2000',
  });
  const port = await freePort();
  await start('gateway', { PORT: String(port) });
  base = `http://127.0.0.1:${port}`;
  const flow = withNode(
    withNode(fullFlow(), 'llm', { baseURL: backends.chat.baseURL, model: 'stub' }),
    'hook',
    {
      url: 'http://127.0.0.1:9/x',
    },
  );
  agentId = (await post('/api/agents', { name: 'Resilient', flow })).body.id as string;
}, 120_000);

describe('load-based admission (issue 50)', () => {
  it('an overloaded instance refuses new sessions (503 + Retry-After), another takes them, and it rejoins once recovered', async () => {
    const loaded = await start(
      'playground',
      playgroundEnv({ ...BY_EVENT_LOOP, NODE_OPTIONS: `--import ${HOG}`, LOAD_RECOVER_MS: '1000' }),
    );
    // its event loop busy 700 ms of every 800 ms: p99 ~700 ms, past the threshold
    loaded.child.kill('SIGUSR2');
    await loaded.waitFor('"code":"INSTANCE_OVERLOADED"', 15_000);
    console.log('[overload] overloaded');
    // alone, it takes nothing: the start answers 503 with Retry-After, and no session is stored
    const refused = await startText();
    expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    expect(refused.body.code).toBe('CAPACITY_EXHAUSTED');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);

    const quiet = await start('playground', playgroundEnv({ ...BY_EVENT_LOOP, LOAD_RECOVER_MS: '500' }));
    const instances = [loaded, quiet];
    const hosts: number[] = [];
    for (let i = 0; i < 6; i++) {
      const started = await startTextRetrying();
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      hosts.push(await hostOf(started.body.sessionId as string, instances));
    }
    console.log('[overload] hosts', hosts);
    expect(hosts).toEqual([1, 1, 1, 1, 1, 1]);

    // the load gone, it rejoins the queue group: it takes its share again
    loaded.child.kill('SIGUSR2');
    await loaded.waitFor('"msg":"load recovered: taking new sessions again"', 30_000);
    await expect
      .poll(
        async () => {
          const started = await startText();
          expect(started.status).toBe(201);
          return hostOf(started.body.sessionId as string, instances);
        },
        { timeout: 20_000, interval: 50 },
      )
      .toBe(0);
    await stopped(loaded, 'SIGKILL');
    await stopped(quiet, 'SIGKILL');
  }, 240_000);
});

/** SESSION_MAX_BEHIND_MS's default (docs/operations.md): the bound both instances below run with. */
const SESSION_MAX_BEHIND_MS = 3000;
const BOUND = { SESSION_MAX_BEHIND_MS: String(SESSION_MAX_BEHIND_MS) };

describe('a session too far behind real time (issue 50)', () => {
  it('is ended with its reason, its caller told and closed; a session within the bound goes on', async () => {
    // the documented bound on both instances; the load, when on, holds this one's event loop 100 ms
    // on every turn: each turn hears at most one 32 ms window of a caller (one VAD inference, one turn to come
    // back), so its callers' audio piles up ahead of the VAD without end. One session fills it.
    const held = await start(
      'playground',
      playgroundEnv({
        NODE_OPTIONS: `--import ${HOG}`,
        HOG_BLOCK_MS: '100',
        HOG_EVERY_MS: '0',
        MAX_SESSIONS: '1',
        ...BOUND,
      }),
    );
    const voiceAgent = await post('/api/agents', {
      name: 'Deaf call',
      flow: backends.flow(),
    });
    const deafAgent = voiceAgent.body.id as string;
    const open = async () => {
      const call = await post(`/api/agents/${deafAgent}/voice-sessions`, { apiKeys: { openai: KEY } });
      expect(call.status, JSON.stringify(call.body)).toBe(201);
      const client = new VoiceClient({ url: base.replace(/^http/, 'ws') + (call.body.audioPath as string) });
      await client.ready;
      await expect.poll(() => client.segments.length, { timeout: 30_000 }).toBeGreaterThan(0);
      let closed = false;
      void client.closed.then(() => (closed = true));
      return { sessionId: call.body.sessionId as string, client, isClosed: () => closed };
    };
    const behind = await open();
    // the held instance is full: the next session goes to a quiet one, with the same bound
    const quiet = await start('playground', playgroundEnv(BOUND));
    const within = await open();
    expect(await hostOf(behind.sessionId, [held, quiet])).toBe(0);
    expect(await hostOf(within.sessionId, [held, quiet])).toBe(1);

    held.child.kill('SIGUSR2');
    const loadedAt = Date.now();
    // the caller talks on, as callers do: the VAD falls ever further behind, until the instance ends the call
    behind.client.say(speak('Hello? Can you hear me? I would like to book an appointment please'));
    await expect
      .poll(behind.isClosed, { timeout: 120_000, interval: 200 })
      .toBe(true)
      .catch(withWarningsOf(held));
    console.log(`[behind real time] caller closed ${Date.now() - loadedAt} ms after the load began`);
    // the load passes; what it ended stays ended
    held.child.kill('SIGUSR2');
    // the caller was told why before the socket closed, and the close is a session's end, not a fault
    expect(behind.client.events.find((e) => e.type === 'session_ended')).toMatchObject({
      reason: 'behind real time',
    });
    expect(await behind.client.closed).toEqual({ code: 1000, reason: 'session ended' });
    // the operator's line says how far behind it was: past the bound
    const line = held
      .output()
      .split('\n')
      .find((l) => l.includes('"code":"SESSION_BEHIND_REAL_TIME"') && l.includes(behind.sessionId));
    expect(line).toBeDefined();
    const { behindMs } = JSON.parse(line!) as { behindMs: number };
    console.log(`[behind real time] ended ${behindMs} ms behind`);
    expect(behindMs).toBeGreaterThan(SESSION_MAX_BEHIND_MS);
    // its record is closed, with the reason in its stored events
    const record = await get(`/api/agents/${deafAgent}/test-sessions/${behind.sessionId}`);
    expect(record.body).toMatchObject({ status: 'closed' });
    expect(await storedEvents(deafAgent, behind.sessionId)).toContain('"reason":"behind real time"');

    // the session within the bound went on meanwhile, and still does some load checks later
    await new Promise((r) => setTimeout(r, 8 * Number(playgroundEnv().LOAD_CHECK_INTERVAL_MS)));
    expect(within.isClosed()).toBe(false);
    expect(within.client.events.some((e) => e.type === 'session_ended')).toBe(false);
    expect((await get(`/api/agents/${deafAgent}/test-sessions/${within.sessionId}`)).body).toMatchObject({
      status: 'open',
    });
    expect(quiet.output()).not.toContain('"code":"SESSION_BEHIND_REAL_TIME"');
    // and ends as its caller ends it
    within.client.send({ type: 'end' });
    expect(await within.client.closed).toEqual({ code: 1000, reason: 'session ended' });
    expect(await storedEvents(deafAgent, within.sessionId)).toContain('"reason":"client ended"');
    await stopped(held, 'SIGKILL');
    await stopped(quiet, 'SIGKILL');
  }, 240_000);
});

describe('a drained instance (SIGTERM, issue 50)', () => {
  it('takes no new session at once, lets its sessions finish, then ends the rest with the flow’s goodbye', async () => {
    const draining = await start(
      'playground',
      playgroundEnv({ DRAIN_TIMEOUT_MS: '4000', DRAIN_GOODBYE_MS: '8000', SHUTDOWN_TIMEOUT_MS: '20000' }),
    );
    // three text sessions and a call, all on it (the only instance)
    const texts: string[] = [];
    for (let i = 0; i < 3; i++) {
      const started = await startText();
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      texts.push(started.body.sessionId as string);
    }
    const voiceAgent = await post('/api/agents', {
      name: 'Drained call',
      flow: backends.flow({ drainGoodbye: DRAIN_GOODBYE }),
    });
    const voiceAgentId = voiceAgent.body.id as string;
    const call = await post(`/api/agents/${voiceAgentId}/voice-sessions`, { apiKeys: { openai: KEY } });
    expect(call.status, JSON.stringify(call.body)).toBe(201);
    const callId = call.body.sessionId as string;
    const client = new VoiceClient({ url: base.replace(/^http/, 'ws') + (call.body.audioPath as string) });
    await client.ready;
    // the greeting played: the call is under way
    await expect.poll(() => client.segments.length, { timeout: 30_000 }).toBeGreaterThan(0);

    const other = await start('playground', playgroundEnv());
    const exited = stopped(draining, 'SIGTERM');
    await draining.waitFor('"msg":"draining sessions"', 10_000);
    // new starts go to the other instance
    for (let i = 0; i < 3; i++) {
      const started = await startTextRetrying();
      expect(started.status, JSON.stringify(started.body)).toBe(201);
      expect(await hostOf(started.body.sessionId as string, [draining, other])).toBe(1);
    }
    // its sessions go on: a turn is answered, two end as their users end them
    const turn = await post(`/api/agents/${agentId}/text-sessions/${texts[0]}/turns`, { text: 'Hi' });
    expect(turn.status, JSON.stringify(turn.body)).toBe(200);
    for (const id of texts.slice(0, 2)) {
      expect((await send('DELETE', `/api/agents/${agentId}/text-sessions/${id}`)).status).toBe(200);
    }
    // the call and the last text session outlast DRAIN_TIMEOUT_MS: the caller hears the goodbye, then the end
    const closed = await client.closed;
    expect(closed.code).toBe(1000);
    // said (LiveKit speaks it sentence by sentence) and played to the caller after the greeting
    expect(backends.speech.requests.speech.map((r) => r.input).join(' ')).toContain(DRAIN_GOODBYE);
    expect(client.segments.length).toBeGreaterThanOrEqual(2);
    // the caller's socket carried the end and its reason
    expect(client.events.find((e) => e.type === 'session_ended')).toMatchObject({ reason: 'drained' });
    expect(await exited).toBe(0);
    for (const [agent, id, reason] of [
      [agentId, texts[0], 'delete'],
      [agentId, texts[2], 'drained'],
      [voiceAgentId, callId, 'drained'],
    ] as const) {
      const record = await get(`/api/agents/${agent}/test-sessions/${id}`);
      expect(record.body, id).toMatchObject({ status: 'closed' });
      const events = await fetch(`${base}/api/agents/${agent}/test-sessions/${id}/events`).then((r) =>
        r.text(),
      );
      expect(events).toContain(`"reason":"${reason}"`);
    }
    await stopped(other, 'SIGKILL');
  }, 240_000);
});

describe('an instance lost mid-call (kill -9, issue 50)', () => {
  it('closes the caller 4503 within 5 s, saying why; the record closes instance_lost with what was recorded', async () => {
    const doomed = await start('playground', playgroundEnv({ RECORDING_FLUSH_MS: '1000' }));
    const voiceAgent = await post('/api/agents', {
      name: 'Lost call',
      flow: backends.flow(),
    });
    const lostAgent = voiceAgent.body.id as string;
    const call = await post(`/api/agents/${lostAgent}/voice-sessions`, {
      apiKeys: { openai: KEY },
    });
    expect(call.status, JSON.stringify(call.body)).toBe(201);
    const sessionId = call.body.sessionId as string;
    const client = new VoiceClient({ url: base.replace(/^http/, 'ws') + (call.body.audioPath as string) });
    await client.ready;
    await expect.poll(() => client.segments.length, { timeout: 30_000 }).toBeGreaterThan(0);
    // the caller speaks (real speech) after the greeting
    const utterance = speak('I would like to book an appointment please');
    const spokeAt = Date.now();
    client.say(utterance);
    const spokeMs = (utterance.length / 16_000) * 1000;
    const started = client.events.find((e) => e.type === 'recording_started') as { at: number } | undefined;
    expect(started).toBeDefined();
    const zero = started!.at;
    // what the instance has written to the bucket while recording (decision 35): wait until it covers the speech
    await recordingCovers(doomed, lostAgent, sessionId, spokeAt + spokeMs + 300);

    const killedAt = await killedAndTold(doomed, client, 'caller');

    // the owner sweep (every 2 s here, two misses) closes the record with its reason and names the recording
    const record = async () => (await get(`/api/agents/${lostAgent}/test-sessions/${sessionId}`)).body;
    await untilEndedWithRecording(record, 'closed', sessionsService);
    const session = await record();
    expect(session.endedReason).toBe('instance_lost');
    const recording = session.recording as { durationMs: number; bytes: number; startedAt: number };
    expect(recording.startedAt).toBe(zero);
    expect(recording.durationMs).toBeGreaterThan(spokeAt + spokeMs - zero);
    expect(recording.durationMs).toBeLessThanOrEqual(killedAt - zero);

    // the recording is served, a playable Ogg Opus file that holds the caller's speech where it was said
    await expectPlayable(
      `/api/agents/${lostAgent}/test-sessions/${sessionId}/recording`,
      recording,
      spokeAt - zero,
      spokeMs,
    );
    console.log(
      `[kill -9 playground] recording kept: ${recording.durationMs} ms of ${killedAt - zero} ms, ${recording.bytes} bytes`,
    );
  }, 240_000);

  it('a public call: the caller is closed 4503 within 5 s, the call ends instance_lost, its recording kept and served', async () => {
    const doomed = await start('playground', playgroundEnv({ RECORDING_FLUSH_MS: '1000' }));
    const http = api(base);
    const deployed = await post('/api/agents', {
      name: 'Lost public call',
      flow: backends.flow(),
    });
    const callAgent = deployed.body.id as string;
    const deploy: DeployRecord = await liveDeploy(http, callAgent);
    // a caller of the public page: no builder token, the deploy's subdomain
    const { status, started } = await startWebCall(base, deploy.subdomain);
    expect(status, JSON.stringify(started)).toBe(201);
    const { callId } = started;
    expect(await hostOf(callId, [doomed])).toBe(0);
    const client = await joinCall(base, started.audioPath);
    const utterance = speak('I would like to book an appointment please');
    const spokeAt = Date.now();
    client.say(utterance);
    const spokeMs = (utterance.length / 16_000) * 1000;
    // what the instance has written to the bucket while recording the call: wait until it covers the speech
    const zero = await recordingCovers(doomed, callAgent, callId, spokeAt + spokeMs + 300);

    const killedAt = await killedAndTold(doomed, client, 'public caller');

    // the owner sweep ends the call at its instance's first miss, and names what was recorded as its recording
    const callOf = async () => (await http.get(`/api/agents/${callAgent}/calls/${callId}`)).body;
    await untilEndedWithRecording(callOf, 'ended', sessionsService);
    const call = await callOf();
    expect(call.endedReason).toBe('instance_lost');
    // ended when the sweep first found its instance gone: after the caller spoke, before now
    expect(call.endedAt).toBeGreaterThan(spokeAt);
    expect(call.endedAt).toBeLessThanOrEqual(Date.now());
    const recording = call.recording as { durationMs: number; bytes: number; startedAt: number };
    expect(recording.startedAt).toBe(zero);
    expect(recording.durationMs).toBeGreaterThan(spokeAt + spokeMs - zero);
    expect(recording.durationMs).toBeLessThanOrEqual(killedAt - zero);
    // served by the builder's route for calls: a playable file with the caller's speech where it was said
    await expectPlayable(
      `/api/agents/${callAgent}/calls/${callId}/recording`,
      recording,
      spokeAt - zero,
      spokeMs,
    );
    console.log(
      `[kill -9 playground] call recording kept: ${recording.durationMs} ms of ${killedAt - zero} ms, ${recording.bytes} bytes`,
    );
  }, 240_000);
});

/**
 * Waits for a lost session's or call's record to reach `status` (the owner sweep's work) and then name its
 * recording; when the recording never comes, prints the sessions service's warnings and errors (why not).
 */
async function untilEndedWithRecording(
  read: () => Promise<Record<string, unknown>>,
  status: 'closed' | 'ended',
  sessionsService: { output(): string },
): Promise<void> {
  await expect.poll(async () => (await read()).status, { timeout: 60_000, interval: 500 }).toBe(status);
  await expect
    .poll(async () => (await read()).recording, { timeout: 10_000, interval: 200 })
    .not.toBeNull()
    .catch(withWarningsOf(sessionsService));
}

/** A failed wait's handler: prints the process's warning and error lines (why it failed), then fails as it would. */
function withWarningsOf(proc: { output(): string }): (err: unknown) => never {
  return (err) => {
    console.log(
      proc
        .output()
        .split('\n')
        .filter((l) => /"level":[45]0/.test(l))
        .join('\n'),
    );
    throw err;
  };
}

/**
 * SIGKILLs the instance running `client`'s session and holds the product's bound (docs/api.md, close code
 * 4503): the caller is closed within 5 s (two probes of the session's owner a second apart), saying why.
 * Resolves with when the kill was sent.
 */
async function killedAndTold(
  doomed: ServiceProcess,
  client: { closed: Promise<{ code: number; reason: string }> },
  who: string,
): Promise<number> {
  let closedAt = 0;
  void client.closed.then(() => (closedAt = Date.now()));
  const killedAt = Date.now();
  await stopped(doomed, 'SIGKILL');
  await expect.poll(() => closedAt, { timeout: 5000, interval: 50 }).toBeGreaterThan(0);
  expect(await client.closed).toEqual({ code: 4503, reason: 'the instance running the session is gone' });
  console.log(`[kill -9 playground] ${who} closed 4503 ${closedAt - killedAt} ms after the kill`);
  return killedAt;
}
