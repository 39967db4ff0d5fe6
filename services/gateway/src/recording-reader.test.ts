import { createHash } from 'node:crypto';
import { jetstream, jetstreamManager, StorageType, type JetStreamClient } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
import { sealRecording } from '@vab/bus';
import {
  RECORDINGS_BUCKET,
  RECORDINGS_STREAM,
  recordingChunksId,
  recordingChunksSubjectOf,
  recordingObject,
} from '@vab/contracts';
import { startNats, type DisposableServer } from '@vab/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRecording, readRecordingMeta, type ByteRange, type ReadCount } from './recording-reader.js';

let nats: DisposableServer;
let nc: NatsConnection;
let js: JetStreamClient;
/** A recording as the playground writes one: 300 chunks of 1–3 KB (a flush's pages each), then its meta. */
const CHUNKS = 300;
let file: Buffer;

beforeAll(async () => {
  nats = await startNats();
  nc = await connect({ servers: nats.url });
  js = jetstream(nc);
  await new Objm(nc).create(RECORDINGS_BUCKET, { storage: StorageType.File });
  const parts: Buffer[] = [];
  let seed = 7;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < CHUNKS; i++) {
    const part = Buffer.alloc(1000 + Math.floor(random() * 2000));
    for (let b = 0; b < part.length; b++) part[b] = Math.floor(random() * 256);
    parts.push(part);
    const h = headers();
    h.set('Vab-Recording-Chunk', String(i));
    await js.publish(recordingChunksSubjectOf(recordingChunksId('agent-1', 'long')), part, { headers: h });
  }
  file = Buffer.concat(parts);
  await seal('agent-1', 'long', file, CHUNKS);
}, 120_000);

afterAll(async () => {
  await nc?.close();
  await nats?.dispose();
});

const seal = (agentId: string, sessionId: string, bytes: Buffer, chunks: number) =>
  sealRecording(js, {
    agentId,
    sessionId,
    size: bytes.length,
    chunks,
    sha256: createHash('sha256').update(bytes).digest(),
  });

async function read(sessionId: string, range: ByteRange | null, agentId = 'agent-1') {
  const meta = await readRecordingMeta(await jetstreamManager(nc), agentId, sessionId);
  if (!meta) throw new Error('no recording');
  const count: ReadCount = { chunks: 0, headers: 0 };
  const parts: Buffer[] = [];
  for await (const part of await openRecording(js, meta, range, count)) parts.push(Buffer.from(part));
  return { bytes: Buffer.concat(parts), count };
}

describe('reading a recording from the bucket', () => {
  it('reads a small range from its first chunks only, not the whole recording', async () => {
    const { bytes, count } = await read('long', { start: 0, end: 1023 });
    expect(bytes.equals(file.subarray(0, 1024))).toBe(true);
    // the first chunk holds at least 1000 bytes: one fetch of one chunk, at most a second of two
    expect(count).toEqual({ chunks: expect.any(Number), headers: 0 });
    expect(count.chunks).toBeLessThanOrEqual(3);
  });

  it("skips the chunks before a range's start (their sizes read, not their bytes) and stops at its end", async () => {
    const start = Math.floor(file.length / 2);
    const { bytes, count } = await read('long', { start, end: start + 4999 });
    expect(bytes.equals(file.subarray(start, start + 5000))).toBe(true);
    // 5000 bytes span at most four chunks of 1–3 KB; one fetch more than needed at most doubles them
    expect(count.chunks).toBeLessThanOrEqual(7);
    // sizes up to the chunk holding the start, about half of them
    expect(count.headers).toBeGreaterThan(CHUNKS / 4);
    expect(count.headers).toBeLessThan(CHUNKS);
    const tail = await read('long', { start: file.length - 100, end: file.length - 1 });
    expect(tail.bytes.equals(file.subarray(file.length - 100))).toBe(true);
    expect(tail.count.chunks).toBe(1);
  });

  it('reads the whole recording, every chunk once, and leaves no consumer behind', async () => {
    const { bytes, count } = await read('long', null);
    expect(bytes.equals(file)).toBe(true);
    expect(count).toEqual({ chunks: CHUNKS, headers: 0 });
    const jsm = await jetstreamManager(nc);
    await expect
      .poll(async () => (await jsm.consumers.list(RECORDINGS_STREAM).next()).length, { timeout: 10_000 })
      .toBe(0);
  });

  it('fails a whole read whose bytes do not match the digest', async () => {
    const other = Buffer.from('not these bytes');
    await js.publish(
      recordingChunksSubjectOf(recordingChunksId('agent-1', 'corrupt')),
      Buffer.from('these bytes!!!!'),
    );
    await seal('agent-1', 'corrupt', other, 1);
    await expect(read('corrupt', null)).rejects.toThrow(/digest/);
    // a part cannot be checked: it is served
    expect((await read('corrupt', { start: 0, end: 4 })).bytes.toString()).toBe('these');
  });

  it("reads what the Object Store's own client put, and none for what it deleted", async () => {
    const store = await new Objm(nc).open(RECORDINGS_BUCKET);
    const big = Buffer.alloc(1_000_000, 0x5a);
    big.write('the middle', 500_000);
    await store.putBlob({ name: recordingObject('agent-2', 'put') }, big);
    const { bytes, count } = await read('put', { start: 500_000, end: 500_009 }, 'agent-2');
    expect(bytes.toString()).toBe('the middle');
    // 128 KiB chunks: the fourth holds it
    expect(count).toEqual({ chunks: 1, headers: 4 });
    expect((await read('put', null, 'agent-2')).bytes.equals(big)).toBe(true);
    await store.delete(recordingObject('agent-2', 'put'));
    expect(await readRecordingMeta(await jetstreamManager(nc), 'agent-2', 'put')).toBeNull();
    expect(await readRecordingMeta(await jetstreamManager(nc), 'agent-2', 'never')).toBeNull();
  });
});
