import {
  headers as natsHeaders,
  type Msg,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import {
  AppError,
  contract,
  Headers,
  statusOfError,
  specOf,
  toFieldIssues,
  type ErrorBody,
  type ParsedRequestOf,
  type ResponseOf,
  type ServiceName,
  type SubjectsOf,
} from '@vab/contracts';
import type { Logger } from 'pino';
import { lazyChild } from './lazy-child.js';
import { busObserver } from './observe.js';
import { serveInSpan } from './trace.js';
import { encodeJson, encodeReply, decodeText, type RawJson } from './codec.js';
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
// the module's own: the global `performance` is a getter on globalThis, run on every read (Node 20)
import { performance } from 'node:perf_hooks';

export interface HandlerContext {
  requestId: string;
  /** Who asked, when the gateway said (Headers.caller: a token's identity or an address, never a credential). */
  caller: string | undefined;
  log: Logger;
  /** Reply header for the gateway to copy (e.g. ETag). */
  setHeader(name: string, value: string): void;
}

export type Handler<S extends SubjectsOf<ServiceName>> = (
  request: ParsedRequestOf<S>,
  ctx: HandlerContext,
) => Promise<ResponseOf<S> | RawJson<ResponseOf<S>>>;

/** A service's handler table: exactly one handler per subject it owns, checked by the compiler. */
export type HandlerTable<Svc extends ServiceName> = { [S in SubjectsOf<Svc>]: Handler<S> };

/** A reply as it goes out: its bytes, and the headers its handler set (e.g. ETag). */
export interface Reply {
  data: Uint8Array;
  headers: Record<string, string>;
}

/** One request, as an interceptor sees it: where it came, a header of it, what it asked, and its handling. */
export interface InterceptedCall {
  subject: string;
  header(name: string): string | undefined;
  request: unknown;
  log: Logger;
  run(): Promise<Reply>;
}

/** Wraps the handling of a request: it may answer itself, or run the handler (and keep what it answered). */
export type Interceptor = (call: InterceptedCall) => Promise<Reply>;

export interface ServeOptions<Svc extends ServiceName> {
  service: Svc;
  handlers: HandlerTable<Svc>;
  log: Logger;
  /** Wraps the subjects the contract calls idempotent (the service kit's Idempotency-Key handling). */
  idempotency?: Interceptor | undefined;
}

/** The longest `resume` waits for the server to confirm the subscription. */
const RESUME_WAIT_MS = 2_000;

/** Runs `subscribe`, and resolves once the server has the subscription (2 s at most); never rejects. */
function rejoin(nc: NatsConnection, log: Logger, subject: string, subscribe: () => void): Promise<void> {
  try {
    subscribe();
  } catch (err) {
    // a closed or draining connection refuses it; the subscriptions it closed report that (`closed`)
    log.debug({ subject, err: safeError(err) }, 'not rejoined: the connection is closing');
    return Promise.resolve();
  }
  // a disconnected connection holds the flush until it is back, and a caller (a session's stop) does not wait
  // that long
  return settledWithin(nc.flush(), RESUME_WAIT_MS);
}

/** `p` settled or `ms` passed, whichever is first; never rejects. */
function settledWithin(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([p.then(noop, noop), bound]).finally(() => clearTimeout(timer));
}
const noop = (): void => undefined;

export interface Served {
  /** Resolves once the server has registered every subscription (a flush round trip). */
  ready: Promise<void>;
  /**
   * Leaves / rejoins the queue group of one subject: an instance at capacity stops being offered work,
   * so load spreads over the others without a scheduler. `resume` resolves once this connection's server has
   * the subscription again (a flush round trip; 2 s at most): a request sent to that server after that reaches
   * this instance (the other servers of a cluster hear of it over their routes, a moment later). It never
   * rejects.
   */
  pause(subject: string): void;
  resume(subject: string): Promise<void>;
  /**
   * Stops taking new requests, waits for in-flight ones (the drain and the wait share one bound), leaves
   * the connection open.
   */
  stop(timeoutMs: number): Promise<void>;
  inFlight(): number;
  /**
   * Resolves when the service stopped serving on its own: a subscription closed that neither `pause` nor
   * `stop` closed (a permissions violation, the connection closed). The service has stopped itself by then,
   * as nats.js's own service does; the process should report it and go (`runProcess` exits).
   */
  closed: Promise<Error>;
}

export interface SafeError {
  type: string;
  message: string;
  stack?: string | undefined;
  cause?: SafeError | undefined;
}

/**
 * What of an unexpected error may be logged: its type, message and stack, and the same of its `cause` (a few
 * levels deep). Library errors carry more (an ioredis ReplyError carries the command's arguments, i.e. stored
 * flows that may hold MCP credentials).
 */
export function safeError(err: unknown, depth = 3): SafeError {
  if (!(err instanceof Error)) return { type: typeof err, message: 'non-error thrown' };
  const safe: SafeError = { type: err.name, message: err.message, stack: err.stack };
  if (err.cause !== undefined && depth > 0) safe.cause = safeError(err.cause, depth - 1);
  return safe;
}

function errorReply(body: ErrorBody) {
  const h = natsHeaders();
  h.append(Headers.serviceError, body.message.slice(0, 200));
  h.append(Headers.serviceErrorCode, String(statusOfError(body)));
  return { data: encodeJson(body), headers: h };
}

export interface AnswerOptions<Req, Res> {
  nc: NatsConnection;
  msg: Msg;
  log: Logger;
  subject: string;
  schema: z.ZodType<Req>;
  handler: (request: Req, ctx: HandlerContext) => Promise<Res | RawJson<Res>>;
  /** Wraps the handler's run (the idempotency store, for subjects that honour an Idempotency-Key). */
  intercept?: Interceptor | undefined;
}

/**
 * Answers one request: parses and re-validates it with `schema`, awaits `handler`, and always replies —
 * with the result, or `{code, message}` plus the micro error headers. Used by `serve` and by services that
 * subscribe to subjects of their own making (e.g. a per-session subject only its owning instance holds).
 */
export function answer<Req, Res>(opts: AnswerOptions<Req, Res>): Promise<string | undefined> {
  return serveInSpan(opts.subject, opts.msg.headers, () => answerIn(opts));
}

/** Answers; resolves to the error code it answered with, if it answered with one. */
async function answerIn<Req, Res>(opts: AnswerOptions<Req, Res>): Promise<string | undefined> {
  const { nc, msg, log, subject, schema, handler, intercept } = opts;
  const started = performance.now();
  let failed: string | undefined;
  const requestId = msg.headers?.get(Headers.requestId) || randomUUID();
  const reqLog = lazyChild(log, { requestId, subject });
  let reply: { data: Uint8Array; headers: ReturnType<typeof natsHeaders> };
  try {
    let raw: unknown;
    try {
      raw = JSON.parse(decodeText(msg.data));
    } catch {
      throw new AppError('INVALID_JSON', 'request payload is not valid JSON');
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      throw new AppError('VALIDATION_FAILED', 'request failed validation', {
        issues: toFieldIssues(parsed.error),
      });
    }
    const run = async (): Promise<Reply> => {
      const headers: Record<string, string> = {};
      const ctx: HandlerContext = {
        requestId,
        caller: msg.headers?.get(Headers.caller) || undefined,
        log: reqLog,
        setHeader: (name, value) => void (headers[name] = value),
      };
      return { data: encodeReply(await handler(parsed.data, ctx)), headers };
    };
    const done = intercept
      ? await intercept({
          subject,
          header: (name) => msg.headers?.get(name) || undefined,
          request: parsed.data,
          log: reqLog,
          run,
        })
      : await run();
    const h = natsHeaders();
    // distinct names into a new set: `append` (`set` would scan for a value to replace first)
    for (const [name, value] of Object.entries(done.headers)) h.append(name, value);
    reply = { data: done.data, headers: h };
    const max = nc.info?.max_payload;
    if (max !== undefined && reply.data.byteLength > max - 4096) {
      reqLog.error({ bytes: reply.data.byteLength, maxPayload: max }, 'reply exceeds bus payload limit');
      reply = errorReply({
        code: 'PAYLOAD_TOO_LARGE',
        message: 'the response is larger than the bus payload limit',
      });
      failed = 'PAYLOAD_TOO_LARGE';
    }
  } catch (err) {
    failed = err instanceof AppError ? err.code : 'INTERNAL';
    if (err instanceof AppError) {
      reqLog.debug(
        { code: err.code, cause: err.cause === undefined ? undefined : safeError(err.cause) },
        'request failed',
      );
      reply = errorReply(err.toBody());
    } else {
      reqLog.error({ err: safeError(err) }, 'unhandled error');
      reply = errorReply({ code: 'INTERNAL', message: 'internal error' });
    }
  }
  busObserver().server(subject, failed ?? 'ok', (performance.now() - started) / 1000);
  if (!msg.reply) return failed;
  try {
    msg.respond(reply.data, { headers: reply.headers });
  } catch (err) {
    reqLog.error({ err: safeError(err) }, 'reply failed');
  }
  return failed;
}

/**
 * Serves every subject of one service in a queue group named after it. Each request is re-validated with
 * the contract's schema, the handler is awaited, and a reply is always sent: nats.js only catches
 * synchronous throws in callbacks, so a lost reply would leave the caller waiting for its timeout.
 */
export function serve<Svc extends ServiceName>(nc: NatsConnection, opts: ServeOptions<Svc>): Served {
  const { service, handlers, log } = opts;
  const inflight = new Set<Promise<unknown>>();
  const subs = new Map<string, Subscription>();
  let stopped = false;
  let reportClosed!: (err: Error) => void;
  const closed = new Promise<Error>((resolve) => (reportClosed = resolve));

  const handle = (subject: SubjectsOf<Svc>, msg: Msg): Promise<unknown> =>
    // The table's type ties each handler to its subject's schema; the union is widened here on purpose.
    answer({
      nc,
      msg,
      log,
      subject,
      schema: contract[subject].request as z.ZodType<unknown>,
      handler: handlers[subject] as Handler<SubjectsOf<Svc>> as (
        req: unknown,
        ctx: HandlerContext,
      ) => Promise<unknown>,
      intercept: specOf(subject).idempotent ? opts.idempotency : undefined,
    });

  const subscribe = (subject: SubjectsOf<Svc>) => {
    const sub = nc.subscribe(subject, {
      queue: service,
      callback: (err, msg) => {
        if (err) {
          log.error({ err: safeError(err), subject }, 'subscription error');
          return;
        }
        const p = handle(subject, msg).finally(() => inflight.delete(p));
        inflight.add(p);
      },
    });
    // pause and stop remove a subscription from `subs` before closing it: any other close is unexpected
    void sub.closed.then((err) => {
      if (stopped || subs.get(subject) !== sub) return;
      const cause = err instanceof Error ? err : new Error(`subscription to ${subject} closed`);
      log.error({ code: 'SUBSCRIPTION_CLOSED', subject, err: safeError(cause) }, 'stopped serving');
      void served.stop(0).then(() => reportClosed(cause));
    });
    return sub;
  };
  const subjects = Object.keys(handlers) as SubjectsOf<Svc>[];
  if (!opts.idempotency && subjects.some((subject) => specOf(subject).idempotent)) {
    log.warn(
      { code: 'IDEMPOTENCY_STORE_MISSING', service },
      'no idempotency store: retries with an Idempotency-Key run again',
    );
  }
  for (const subject of subjects) subs.set(subject, subscribe(subject));
  const ready = nc.flush().then(() => log.info({ subjects: subs.size, queue: service }, 'serving'));

  const served: Served = {
    ready,
    closed,
    inFlight: () => inflight.size,
    pause(subject) {
      // drained, not unsubscribed: a request the server had already routed here is still answered (by an
      // instance at capacity: with its refusal, at once) instead of being dropped and timing out
      const sub = subs.get(subject);
      subs.delete(subject);
      void sub?.drain().catch(() => undefined);
    },
    resume(subject) {
      if (stopped || subs.has(subject) || !(subject in handlers)) return Promise.resolve();
      return rejoin(nc, log, subject, () => subs.set(subject, subscribe(subject as SubjectsOf<Svc>)));
    },
    stop: (timeoutMs) => stopServing(timeoutMs),
  };

  /**
   * Draining (not unsubscribing) stops new work reaching this instance — queue peers take it — and still
   * handles what the server had already delivered here; unsubscribe would drop that on the floor. The
   * drain and the in-flight wait share one deadline, so stop never takes more than `timeoutMs`.
   */
  async function stopServing(timeoutMs: number): Promise<void> {
    stopped = true;
    const draining = [...subs.values()].map((s) => s.drain().catch(() => undefined));
    subs.clear();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    await Promise.race([Promise.all(draining), deadline]);
    await Promise.race([Promise.allSettled([...inflight]), deadline]);
    clearTimeout(timer);
    if (inflight.size > 0)
      log.warn(
        { code: 'STOPPED_WITH_REQUESTS_IN_FLIGHT', inFlight: inflight.size },
        'stopped with requests in flight',
      );
  }
  return served;
}
