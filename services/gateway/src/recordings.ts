import { Readable } from 'node:stream';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, safeError, type Logger } from '@vab/bus';
import { AppError, CallParams, TestSessionParams, type RecordingMeta } from '@vab/contracts';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorResponses } from './openapi.js';
import { openRecording, readRecordingMeta, type ByteRange } from './recording-reader.js';
import { z } from 'zod';

export type { ByteRange } from './recording-reader.js';

/** What a recording may be asked with: a ticket, for an `<audio>` element when API tokens are on. */
const RecordingQuery = z.object({
  ticket: z.string().optional().describe('A ticket from POST /api/tickets (reusable until it expires)'),
});

/**
 * A `Range` header against a representation of `size` bytes (RFC 9110 §14): one range, or null when the whole
 * representation is to be sent (no header, one that is not a bytes range, or several ranges: the server may
 * ignore those); 'unsatisfiable' when no byte of it is in the representation.
 *
 * Not range-parser (express's, in the lock file): its 1.x answers a suffix longer than the representation
 * (`bytes=-500` of 100 bytes) as unsatisfiable, where RFC 9110 §14.1.2 sends the whole representation (fixed
 * in its 2.0, which needs Node 22): the documented `-suffix` → 206 would not hold.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | null | 'unsatisfiable' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m) return null;
  const [, first, last] = m;
  if (first === '' && last === '') return null;
  if (first === '') {
    // the last `n` bytes
    const n = Number(last);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  if (start >= size) return 'unsatisfiable';
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (end < start) return null;
  return { start, end };
}

/**
 * Whether an `If-None-Match` names this ETag, by the weak comparison RFC 9110 §13.1.2 asks for: `W/"x"` and
 * `"x"` match (a cache may hold either form), as does `*`.
 */
export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const opaque = (tag: string) => (tag.startsWith('W/') ? tag.slice(2) : tag);
  return header.split(',').some((t) => {
    const tag = t.trim();
    return tag === '*' || opaque(tag) === opaque(etag);
  });
}

/** What the route answers, for the API document. */
const RESPONSES = {
  200: {
    description:
      "The whole recording (`Accept-Ranges: bytes`, `ETag`); its zero is the record's `recording.startedAt`",
    content: { 'audio/ogg': { schema: z.string().describe('binary') } },
  },
  206: {
    description: 'The range asked for (`Content-Range: bytes <first>-<last>/<size>`)',
    content: { 'audio/ogg': { schema: z.string().describe('binary') } },
  },
  304: z.null().describe('Not modified (If-None-Match matched the ETag): no body'),
  ...errorResponses(
    'VALIDATION_FAILED',
    'UNAUTHORIZED',
    'NOT_FOUND',
    'RANGE_NOT_SATISFIABLE',
    'RATE_LIMITED',
    'SERVICE_UNAVAILABLE',
  ),
};

/**
 * A voice session's recording (`audio/ogg`, stereo Opus: the user on the left, the agent on the right as
 * played), streamed from the recordings bucket (NATS Object Store) to the client: a blob is no request/reply
 * (a bus message is at most 1 MB), so this route reads the engine directly, as the events route reads its
 * stream: the object's meta, then only the chunks a range needs (`recording-reader.ts`). Ranges (one per
 * request), ETag (the object's digest), If-None-Match and If-Range.
 */
export function registerRecordingRoute(
  app: FastifyInstance,
  deps: { nc: NatsConnection; log: Logger } | undefined,
): void {
  let manager: Promise<JetStreamManager> | undefined;
  const jsm = (nc: NatsConnection) =>
    (manager ??= jetstreamManager(nc).catch((err: unknown) => {
      manager = undefined;
      throw err;
    }));
  // a test session's and a call's (issue 45): the same object naming (`<agentId>/<id>.ogg`), the same answers
  for (const of of [
    {
      url: '/api/agents/:id/test-sessions/:sessionId/recording',
      operationId: 'sessionRecording',
      summary:
        "A voice session's recording: Ogg Opus, the user on the left and the agent (as played) on the right",
      tag: 'test-sessions',
      params: TestSessionParams as z.ZodType,
      idOf: (p: unknown) => ({
        agentId: (p as TestSessionParams).id,
        id: (p as TestSessionParams).sessionId,
      }),
      what: 'test session',
    },
    {
      url: '/api/agents/:id/calls/:callId/recording',
      operationId: 'callRecording',
      summary: "A call's recording: Ogg Opus, the caller on the left and the agent (as played) on the right",
      tag: 'calls',
      params: CallParams as z.ZodType,
      idOf: (p: unknown) => ({ agentId: (p as CallParams).id, id: (p as CallParams).callId }),
      what: 'call',
    },
  ]) {
    app.route({
      method: 'GET',
      url: of.url,
      schema: {
        operationId: of.operationId,
        summary: of.summary,
        tags: [of.tag],
        params: of.params,
        querystring: RecordingQuery,
        response: RESPONSES,
      },
      handler: async (req: FastifyRequest, reply: FastifyReply) => {
        if (!deps) throw new AppError('SERVICE_UNAVAILABLE', 'this gateway has no bus');
        const { agentId, id } = of.idOf(req.params);
        const missing = () =>
          new AppError('NOT_FOUND', `no recording of ${of.what} ${id} (none was made, or not yet stored)`);
        const unavailable = (err: unknown) =>
          new AppError('SERVICE_UNAVAILABLE', 'the recordings store is unavailable', { cause: err });
        let meta: RecordingMeta | null;
        try {
          meta = await readRecordingMeta(await jsm(deps.nc), agentId, id);
        } catch (err) {
          // no bucket yet: no voice session was ever recorded here
          if (isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw missing();
          throw unavailable(err);
        }
        if (!meta) throw missing();
        const { size, digest } = meta;
        const etag = `"${digest}"`;
        void reply
          .header('accept-ranges', 'bytes')
          .header('etag', etag)
          .header('cache-control', 'private, no-cache')
          .type('audio/ogg');
        if (noneMatch(req.headers['if-none-match'], etag)) return reply.code(304).send();
        // If-Range compares strongly: a weak tag never matches, and the whole file is sent
        const ifRange = req.headers['if-range'];
        const range = ifRange === undefined || ifRange === etag ? parseRange(req.headers.range, size) : null;
        if (range === 'unsatisfiable') {
          void reply.header('content-range', `bytes */${size}`);
          throw new AppError('RANGE_NOT_SATISFIABLE', `the recording has ${size} bytes`);
        }
        // opened before the status and length are set: a bucket that fails here answers 503 as it is
        let bytes: AsyncGenerator<Buffer> | undefined;
        try {
          if (size > 0) bytes = await openRecording(jetstream(deps.nc), meta, range);
        } catch (err) {
          throw unavailable(err);
        }
        if (range) {
          void reply
            .code(206)
            .header('content-range', `bytes ${range.start}-${range.end}/${size}`)
            .header('content-length', range.end - range.start + 1);
        } else {
          void reply.header('content-length', size);
        }
        return reply.send(bytes ? Readable.from(logged(bytes, deps.log)) : Buffer.alloc(0));
      },
    });
  }
}

/** The recording's bytes, a read that fails mid-file logged (the client gets a cut-off answer). */
async function* logged(bytes: AsyncGenerator<Buffer>, log: Logger): AsyncGenerator<Buffer> {
  try {
    yield* bytes;
  } catch (err) {
    log.warn({ code: 'RECORDING_READ_FAILED', err: safeError(err) }, 'recording read failed');
    throw err;
  }
}
