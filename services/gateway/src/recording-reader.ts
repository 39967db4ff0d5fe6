import { createHash } from 'node:crypto';
import type { Consumer, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import {
  RecordingMeta,
  recordingChunksSubjectOf,
  recordingDigest,
  recordingMetaSubjectOf,
  RECORDINGS_STREAM,
} from '@vab/contracts';

/** One byte range of a representation, both ends inclusive. */
export interface ByteRange {
  start: number;
  end: number;
}

/** What a read took from the bucket, counted (a test's measure of what a range costs). */
export interface ReadCount {
  /** Chunks read with their bytes. */
  chunks: number;
  /** Chunks' headers read (their sizes) to find where a range starts. */
  headers: number;
}

/** The first data fetch asks this many chunks; each next one twice as many, up to MAX_BATCH. */
const FIRST_BATCH = 1;
const MAX_BATCH = 32;
/** Headers are ~100 bytes: a fetch of sizes asks this many. */
const HEADER_BATCH = 256;
/** A chunk the stream holds comes at once; one that does not come in this long is missing. */
const CHUNK_WAIT_MS = 5000;

/**
 * A recording's meta as stored (the Object Store's, `RecordingMeta`), checked with the schema its writers use;
 * null when there is none or it was deleted. Throws when the bucket does not answer (or was never made:
 * StreamNotFound).
 */
export async function readRecordingMeta(
  jsm: JetStreamManager,
  agentId: string,
  sessionId: string,
): Promise<RecordingMeta | null> {
  // from the stream's leader, as the Object Store's client reads it
  const m = await jsm.streams.getMessage(RECORDINGS_STREAM, {
    last_by_subj: recordingMetaSubjectOf(agentId, sessionId),
  });
  if (!m) return null;
  const meta = RecordingMeta.parse(m.json());
  return meta.deleted ? null : meta;
}

/**
 * The bytes of a recording within `range` (all of it when null), read from its chunks as they are sent on:
 * chunks before the range's start are not read (their sizes are, from headers-only messages, to find the first
 * one wanted), and reading stops once the range's end is read, or the caller stops (a client gone). Chunks are
 * fetched in growing batches (1, 2, 4… 32), so a small range reads a chunk or two, the whole file a few fetches.
 * The whole file is checked against its digest as the Object Store's client does; a part cannot be.
 *
 * Where the first chunk is, and the consumer, are found before this returns: a bucket that does not answer fails
 * here, before any byte is sent.
 */
export async function openRecording(
  js: JetStreamClient,
  meta: RecordingMeta,
  range: ByteRange | null,
  count: ReadCount = { chunks: 0, headers: 0 },
): Promise<AsyncGenerator<Buffer>> {
  const subject = recordingChunksSubjectOf(meta.nuid);
  const { start, end } = range ?? { start: 0, end: meta.size - 1 };
  const from = start > 0 ? await chunkAt(js, subject, start, count) : { seq: 1, offset: 0 };
  const consumer = await js.consumers.get(RECORDINGS_STREAM, {
    filter_subjects: subject,
    opt_start_seq: from.seq,
  });
  const whole = start === 0 && end === meta.size - 1;
  return read(consumer, meta, { start, end }, from.offset, whole, count);
}

async function* read(
  consumer: Consumer,
  meta: RecordingMeta,
  range: ByteRange,
  firstOffset: number,
  whole: boolean,
  count: ReadCount,
): AsyncGenerator<Buffer> {
  const hash = whole ? createHash('sha256') : undefined;
  let offset = firstOffset;
  let fetched = firstOffset;
  let batch = FIRST_BATCH;
  try {
    while (offset <= range.end) {
      // a batch taken whole before its bytes are sent on: the fetch is not held open while a slow client reads
      const msgs = await fetchChunks(consumer, batch, (m) => (fetched += m.data.length) > range.end);
      batch = Math.min(batch * 2, MAX_BATCH);
      for (const m of msgs) {
        count.chunks++;
        const data = m.data;
        const chunkStart = offset;
        offset += data.length;
        hash?.update(data);
        const from = Math.max(0, range.start - chunkStart);
        const to = Math.min(data.length, range.end + 1 - chunkStart);
        if (to > from) yield Buffer.from(data.buffer, data.byteOffset + from, to - from);
      }
      if (offset <= range.end && msgs.at(-1)?.info.pending === 0)
        throw new Error(`the recording's chunks end at byte ${offset} of ${meta.size}`);
    }
    if (hash && recordingDigest(hash.digest()) !== meta.digest)
      throw new Error("the recording's bytes do not match its digest");
  } finally {
    // the consumer would otherwise stay on the server until its inactivity threshold (5 min)
    void consumer.delete().catch(() => undefined);
  }
}

/**
 * Up to `max` chunks from the consumer, stopping early after one for which `enough` says so or when the stream
 * has no more (a fetch would otherwise wait for its expiry). Throws when none came: a chunk is missing.
 */
async function fetchChunks(consumer: Consumer, max: number, enough: (m: JsMsg) => boolean): Promise<JsMsg[]> {
  const msgs: JsMsg[] = [];
  const fetched = await consumer.fetch({ max_messages: max, expires: CHUNK_WAIT_MS });
  for await (const m of fetched) {
    msgs.push(m);
    if (enough(m) || m.info.pending === 0 || msgs.length === max) break;
  }
  if (msgs.length === 0) throw new Error('a recording chunk did not come');
  return msgs;
}

/**
 * The chunk that holds byte `at` of the object on `subject`: its stream sequence and the offset it starts at,
 * from the chunks' sizes alone (a headers-only consumer: `Nats-Msg-Size`, none of their bytes).
 */
async function chunkAt(
  js: JetStreamClient,
  subject: string,
  at: number,
  count: ReadCount,
): Promise<{ seq: number; offset: number }> {
  const sizes = await js.consumers.get(RECORDINGS_STREAM, { filter_subjects: subject, headers_only: true });
  try {
    let offset = 0;
    for (;;) {
      let found: { seq: number; offset: number } | undefined;
      const msgs = await fetchChunks(sizes, HEADER_BATCH, (m) => {
        count.headers++;
        const size = Number(m.headers?.get('Nats-Msg-Size'));
        if (!Number.isInteger(size)) throw new Error('a recording chunk has no size');
        if (offset + size > at) found = { seq: m.seq, offset };
        offset += size;
        return found !== undefined;
      });
      if (found) return found;
      if (msgs.at(-1)?.info.pending === 0) throw new Error(`the recording's chunks end at byte ${offset}`);
    }
  } finally {
    void sizes.delete().catch(() => undefined);
  }
}
