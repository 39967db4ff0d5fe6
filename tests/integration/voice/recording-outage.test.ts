import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Objm } from '@nats-io/obj';
import {
  RECORDINGS_BUCKET,
  RECORDINGS_STREAM,
  recordingChunksId,
  recordingChunksSubjectOf,
  recordingObject,
} from '@vab/contracts';
import { buildGateway } from '@vab/gateway';
import { decodeRecording, startLocalNats, writeToneRecording } from '@vab/testkit';
import type { FastifyInstance } from 'fastify';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oggDurationMs } from '../../../services/playground/src/recording/audio-recording.js';
import { RecordingUpload } from '../../../services/playground/src/recording/recording-upload.js';
import {
  RecordingsBucket,
  type ChunkPublisher,
} from '../../../services/playground/src/recording/recordings-bucket.js';

/**
 * A recording whose bucket fails for a while mid-call (the NATS server stopped and started again, writes refused,
 * answers lost) is stored whole: what the encoder wrote is written to the bucket as the playground does
 * (`RecordingUpload`), and GET of the recording from a gateway gives every byte and the whole length, once.
 */

let nats: Awaited<ReturnType<typeof startLocalNats>>;
let nc: NatsConnection;
let gateway: FastifyInstance;
let dir: string;
/** 20 s of stereo Opus at 32 kbit/s as the recorder writes it (Ogg pages of 1 s). */
let source: Buffer;
let sourceMs: number;
const lines: string[] = [];
const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(line) });
const logged = (msg: string) => lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === msg).length;
/** Never give up reconnecting: the server is stopped on purpose. */
const reconnecting = { maxReconnectAttempts: -1, reconnectTimeWait: 100 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'recording-outage-'));
  const ogg = join(dir, 'source.ogg');
  writeToneRecording(ogg, 20);
  source = readFileSync(ogg);
  sourceMs = (await oggDurationMs(ogg))!;
  nats = await startLocalNats();
  nc = await connect({ servers: nats.url, ...reconnecting });
  const bucket = new RecordingsBucket(nc, config(60_000), log);
  await bucket.ready();
  gateway = await buildGateway({
    nc: await connect({ servers: nats.url, ...reconnecting }),
    log: pino({ level: 'silent' }),
    config: { BODY_LIMIT_BYTES: 1 << 20, REQUEST_TIMEOUT_MS: 5000, READY_TIMEOUT_MS: 500 },
  });
}, 60_000);

afterAll(async () => {
  if (process.env.RECORDING_DEBUG) console.log(lines.join(''));
  await gateway?.close();
  await nc?.close();
  await nats?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

function config(retryMs: number) {
  return {
    RECORDINGS_MAX_AGE_MS: 3_600_000,
    RECORDINGS_MAX_BYTES: 64 * 1024 * 1024,
    RECORDINGS_REPLICAS: 1,
    EVENTS_SETUP_TIMEOUT_MS: 10_000,
    RECORDING_FLUSH_MS: 100,
    RECORDING_FLUSH_RETRY_MS: retryMs,
  };
}

/** A recording of `sessionId` being made: its file written in parts as the encoder does, flushed every 100 ms. */
function recording(sessionId: string, opts: { retryMs?: number; js?: ChunkPublisher } = {}) {
  const retryMs = opts.retryMs ?? 60_000;
  const bucket = new RecordingsBucket(nc, config(retryMs), log);
  const file = join(dir, `${sessionId}.ogg`);
  const chunks = bucket.chunks('agent-1', sessionId, 1_700_000_000_000, opts.js);
  const upload = new RecordingUpload({ file, chunks, flushMs: 100, retryMs, log });
  upload.start();
  let written = 0;
  return {
    chunks,
    upload,
    /** The encoder writes up to this share of the file (not at a page's end: the flush keeps whole pages). */
    write(share: number) {
      const to = Math.floor(source.length * share);
      appendFileSync(file, source.subarray(written, to));
      written = to;
    },
    finish: () => upload.finish(() => oggDurationMs(file)),
  };
}

/** What a user gets: GET of the session's recording. */
async function get(sessionId: string, headers: Record<string, string> = {}) {
  const res = await gateway.inject({
    method: 'GET',
    url: `/api/agents/agent-1/test-sessions/${sessionId}/recording`,
    headers,
  });
  return { status: res.statusCode, body: res.rawPayload };
}

async function expectWhole(sessionId: string) {
  const { status, body } = await get(sessionId);
  expect(status).toBe(200);
  // every byte, once, in order (the gateway checks the digest of a whole read)
  expect(body.equals(source)).toBe(true);
  const decoded = await decodeRecording(body);
  expect(Math.abs(decoded.durationMs - sourceMs)).toBeLessThanOrEqual(20);
}

/** The messages stored on the recording's chunk subject. */
async function storedChunks(sessionId: string): Promise<number> {
  const jsm = await jetstreamManager(nc);
  const subject = recordingChunksSubjectOf(recordingChunksId('agent-1', sessionId));
  const info = await jsm.streams.info(RECORDINGS_STREAM, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

describe('a recording whose bucket fails mid-call', () => {
  it('is stored whole when the NATS server is stopped and started again while it is made', async () => {
    const r = recording('restart');
    r.write(0.3);
    await expect.poll(() => r.chunks.bytes, { timeout: 20_000 }).toBeGreaterThan(0);
    const before = logged('recording not written to the bucket, retrying');
    await nats.stop();
    r.write(0.6);
    // a flush fails (refused, or no answer within the JetStream timeout) and is retried
    await expect
      .poll(() => logged('recording not written to the bucket, retrying'), { timeout: 30_000 })
      .toBeGreaterThan(before);
    await nats.start();
    r.write(1);
    await expect
      .poll(() => logged('recording written to the bucket again'), { timeout: 30_000 })
      .toBeGreaterThan(0);
    const stored = await r.finish();
    expect(stored).toEqual({ durationMs: sourceMs, bytes: source.length });
    // the gateway's own connection reconnects on its own clock: until then it answers 503 (the bucket out of
    // its reach), as a client retrying would see
    await expect.poll(async () => (await get('restart')).status, { timeout: 30_000 }).toBe(200);
    await expectWhole('restart');
  }, 120_000);

  it('stores a chunk once when its write was stored but its answer lost, and none missing when refused', async () => {
    const js = jetstream(nc);
    let calls = 0;
    const flaky: ChunkPublisher = {
      publish: async (subject, data, opts) => {
        calls++;
        // the 2nd and 5th writes: refused before they reach the stream
        if (calls === 2 || calls === 5) throw new Error('no responders');
        const ack = await js.publish(subject, data, opts);
        // the 3rd and 7th: stored, their answer lost (as a timeout while NATS reconnects)
        if (calls === 3 || calls === 7) throw new Error('TIMEOUT');
        return ack;
      },
    };
    const r = recording('flaky', { js: flaky });
    for (const share of [0.2, 0.4, 0.6, 0.8]) {
      r.write(share);
      await expect
        .poll(() => r.chunks.bytes, { timeout: 20_000 })
        .toBeGreaterThanOrEqual(
          // the complete pages written so far are stored (the last partial page waits)
          Math.floor(source.length * share) - 8_000,
        );
    }
    r.write(1);
    const stored = await r.finish();
    expect(calls).toBeGreaterThanOrEqual(7);
    expect(stored).toEqual({ durationMs: sourceMs, bytes: source.length });
    await expectWhole('flaky');
    const { body } = await get('flaky', { range: 'bytes=1000-1999' });
    expect(body.equals(source.subarray(1000, 2000))).toBe(true);
    // each chunk stored once: the subject holds what the meta counts, as the Object Store's own client reads it
    const store = await new Objm(nc).open(RECORDINGS_BUCKET);
    const info = await store.info(recordingObject('agent-1', 'flaky'));
    expect(info?.chunks).toBeGreaterThanOrEqual(5);
    expect(await storedChunks('flaky')).toBe(info?.chunks);
  }, 60_000);

  it('gives up flushing past the bound (logged), and the end of the call still stores it whole', async () => {
    const js = jetstream(nc);
    let down = false;
    let tries = 0;
    const bucket: ChunkPublisher = {
      publish: (subject, data, opts) => {
        if (!down) return js.publish(subject, data, opts);
        tries++;
        return Promise.reject(new Error('bucket unavailable'));
      },
    };
    const r = recording('suspended', { retryMs: 500, js: bucket });
    r.write(0.25);
    await expect.poll(() => r.chunks.bytes, { timeout: 20_000 }).toBeGreaterThan(0);
    down = true;
    r.write(0.5);
    await expect
      .poll(() => logged('recording not written to the bucket until its session ends'), {
        timeout: 20_000,
      })
      .toBe(1);
    const suspended = JSON.parse(lines.find((l) => l.includes('RECORDING_FLUSH_SUSPENDED'))!) as {
      code: string;
      failures: number;
    };
    expect(suspended.code).toBe('RECORDING_FLUSH_SUSPENDED');
    expect(suspended.failures).toBeGreaterThanOrEqual(2);
    expect(tries).toBe(suspended.failures);
    down = false;
    r.write(1);
    expect(await r.finish()).toEqual({ durationMs: sourceMs, bytes: source.length });
    await expectWhole('suspended');
  }, 60_000);

  it('is not kept when the bucket is still down at the end (logged, its chunks removed)', async () => {
    const js = jetstream(nc);
    let down = false;
    const bucket: ChunkPublisher = {
      publish: (subject, data, opts) =>
        down ? Promise.reject(new Error('bucket unavailable')) : js.publish(subject, data, opts),
    };
    const r = recording('lost', { retryMs: 0, js: bucket });
    r.write(0.5);
    await expect.poll(() => r.chunks.bytes, { timeout: 20_000 }).toBeGreaterThan(0);
    down = true;
    r.write(1);
    expect(await r.finish()).toBeUndefined();
    expect(lines.some((l) => l.includes('"RECORDING_NOT_STORED"') && l.includes('bucket unavailable'))).toBe(
      true,
    );
    expect(await storedChunks('lost')).toBe(0);
    expect((await get('lost')).status).toBe(404);
  }, 60_000);
});
