import {
  createInbox,
  errors,
  headers as natsHeaders,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node';
import {
  AppError,
  contract,
  ErrorBody,
  Headers,
  type RequestOf,
  type ResponseOf,
  type Subject,
} from '@vab/contracts';
import { decodeText, encodeJson } from './codec.js';
import { busObserver } from './observe.js';
import { endSpan, startRequestSpan } from './trace.js';
import type { Span } from '@opentelemetry/api';
// the module's own: the global `performance` is a getter on globalThis, run on every read (Node 20)
import { performance } from 'node:perf_hooks';

export interface RequestOptions {
  timeoutMs: number;
  requestId: string;
  /** The client's Idempotency-Key, for subjects that honour one. */
  idempotencyKey?: string | undefined;
  /** Who asked (Headers.caller), on requests that start sessions. */
  caller?: string | undefined;
}

export interface RawReply {
  /** The service's JSON reply, untouched, so the gateway can pass it on without re-serializing. */
  data: Uint8Array;
  headers: MsgHdrs | undefined;
}

/** Sends contract-typed requests; every failure becomes an AppError with a code the gateway can map. */
export class BusClient {
  private connected = true;
  private readonly replies: ReplyMux;

  constructor(private readonly nc: NatsConnection) {
    this.replies = new ReplyMux(nc);
    void this.watchConnection();
  }

  /**
   * While disconnected, nats.js buffers requests until their timeout; a client is better served by an
   * immediate 503 it can retry, so requests fail fast until the connection is back.
   */
  private async watchConnection(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'disconnect') this.connected = false;
      else if (s.type === 'reconnect') this.connected = true;
    }
  }

  isConnected(): boolean {
    return this.connected && !this.nc.isClosed() && !this.nc.isDraining();
  }

  requestRaw<S extends Subject>(subject: S, payload: RequestOf<S>, opts: RequestOptions): Promise<RawReply> {
    return this.send(subject, payload, opts);
  }

  /**
   * A request to a subject made at run time (e.g. the one only a session's owning instance subscribes to).
   * `onNoResponders` is the error to raise when nobody holds it.
   */
  async requestTo<T>(
    subject: string,
    payload: unknown,
    opts: RequestOptions & { onNoResponders: AppError },
  ): Promise<T> {
    try {
      return JSON.parse(decodeText((await this.send(subject, payload, opts)).data)) as T;
    } catch (err) {
      if (err instanceof AppError && err.code === 'SERVICE_UNAVAILABLE' && this.isConnected()) {
        throw opts.onNoResponders;
      }
      throw err;
    }
  }

  /**
   * One request, its span and its timing (outcome: ok or the error code) in the same frame: a wrapper of its
   * own was one more promise on every API request (docs/performance.md).
   */
  private async send(subject: string, payload: unknown, opts: RequestOptions): Promise<RawReply> {
    const started = performance.now();
    let outcome: string | undefined;
    let span: Span | undefined;
    try {
      if (!this.isConnected()) throw new AppError('SERVICE_UNAVAILABLE', 'the message bus is not connected');
      const data = encodeJson(payload);
      const max = this.nc.info?.max_payload;
      if (max !== undefined && data.byteLength > max - 4096) {
        throw new AppError(
          'PAYLOAD_TOO_LARGE',
          `request is larger than the bus payload limit (${max} bytes)`,
        );
      }
      const h = natsHeaders();
      // a new set: `append`, as `set` would first look for a value to replace (nats.js scans every key)
      h.append(Headers.requestId, opts.requestId);
      if (opts.idempotencyKey) h.append(Headers.idempotencyKey, opts.idempotencyKey);
      if (opts.caller) h.append(Headers.caller, opts.caller);
      span = startRequestSpan(subject, h, data.byteLength);
      let msg;
      try {
        msg = await this.replies.request(subject, data, h, opts.timeoutMs);
      } catch (err) {
        throw translateNatsError(err, subject);
      }
      if (msg.headers?.has(Headers.serviceErrorCode)) throw errorFromReply(msg.data);
      return { data: msg.data, headers: msg.headers };
    } catch (err) {
      outcome = err instanceof AppError ? err.code : 'INTERNAL';
      throw err;
    } finally {
      endSpan(span, outcome);
      busObserver().client(subject, outcome ?? 'ok', (performance.now() - started) / 1000);
    }
  }

  /**
   * A request whose reply is parsed with the subject's response schema, so a service that answers
   * something else (an older or newer contract mid-deploy) fails here, named, instead of deep in the caller.
   * Service-to-service replies are small: ~1 µs per parse (docs/decisions/0017-bus-replies-parsed.md). The
   * gateway passes bytes on with `requestRaw` and never pays it.
   */
  async request<S extends Subject>(
    subject: S,
    payload: RequestOf<S>,
    opts: RequestOptions,
  ): Promise<ResponseOf<S>> {
    const reply = await this.requestRaw(subject, payload, opts);
    return parseReply(subject, reply.data);
  }
}

/** One client per connection: one reply inbox and one status watcher per process, not one per caller. */
const clients = new WeakMap<NatsConnection, BusClient>();
export function busClientOf(nc: NatsConnection): BusClient {
  let client = clients.get(nc);
  if (!client) clients.set(nc, (client = new BusClient(nc)));
  return client;
}

function parseReply<S extends Subject>(subject: S, data: Uint8Array): ResponseOf<S> {
  let json: unknown;
  try {
    json = JSON.parse(decodeText(data));
  } catch {
    throw new AppError('INTERNAL', `the reply to ${subject} is not JSON`);
  }
  const parsed = contract[subject].response.safeParse(json);
  if (!parsed.success) {
    throw new AppError('INTERNAL', `the reply to ${subject} does not match its contract`, {
      cause: parsed.error,
    });
  }
  return parsed.data as ResponseOf<S>;
}

interface Pending {
  resolve(msg: Msg): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
}

/**
 * Request/reply over one wildcard inbox subscription per connection, as nats.js's own muxed request does,
 * minus what that costs per request and we don't use: when it retires a request that got its reply it
 * still builds a RequestError (stack trace included) to reject an already-settled promise, plus a random
 * token and two deferreds: measured in docs/performance.md. Replies come to
 * `<inboxPrefix>.<nuid>.<n>`, inside the service's own inbox namespace (deploy/nats.conf).
 */
class ReplyMux {
  private readonly prefix: string;
  private readonly pending = new Map<string, Pending>();
  private sub: Subscription | undefined;
  private next = 0;

  constructor(private readonly nc: NatsConnection) {
    const inboxPrefix = (nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix;
    this.prefix = `${createInbox(inboxPrefix)}.`;
    void nc.closed().then(() => this.failAll(new errors.ClosedConnectionError()));
  }

  request(subject: string, data: Uint8Array, headers: MsgHdrs, timeoutMs: number): Promise<Msg> {
    this.sub ??= this.nc.subscribe(`${this.prefix}*`, {
      callback: (err, msg) => this.onReply(err, msg),
    });
    const token = (this.next++).toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(token);
        reject(new errors.TimeoutError());
      }, timeoutMs);
      this.pending.set(token, { resolve, reject, timer });
      try {
        this.nc.publish(subject, data, { reply: this.prefix + token, headers });
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(token);
        reject(err);
      }
    });
  }

  private onReply(err: Error | null, msg: Msg): void {
    if (err) {
      // the inbox subscription itself failed (e.g. a permissions violation): nothing pending can be answered
      this.sub = undefined;
      this.failAll(new errors.RequestError(err.message, { cause: err }));
      return;
    }
    const token = msg.subject.slice(this.prefix.length);
    const p = this.pending.get(token);
    if (!p) return; // a reply after its request timed out
    this.pending.delete(token);
    clearTimeout(p.timer);
    if (msg.data.length === 0 && msg.headers?.code === 503) p.reject(new errors.NoRespondersError(''));
    else p.resolve(msg);
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
  }
}

function errorFromReply(data: Uint8Array): AppError {
  try {
    const body = ErrorBody.parse(JSON.parse(decodeText(data)));
    return new AppError(body.code, body.message, {
      issues: body.issues,
      details: body.details,
      ...(body.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: body.retryAfterSeconds }),
      // whose capacity is spent decides the HTTP status (a deploy's caps 429, the server's 503): an error
      // passed on by a service in the middle (the playground, for the sessions' admission) must keep it
      ...(body.capacity === undefined ? {} : { capacity: body.capacity }),
    });
  } catch {
    return new AppError('INTERNAL', 'malformed error reply from service');
  }
}

/**
 * Whether a NATS request failed because no one subscribes to its subject: NATS says so at once, so it proves the
 * subject's holder gone, where a timeout proves nothing. `nc.request` reports it as a RequestError, this
 * client's own inbox (and older paths of the library) as a NoRespondersError.
 */
export function isNoResponders(err: unknown): boolean {
  return (
    (err instanceof errors.RequestError && err.isNoResponders()) || err instanceof errors.NoRespondersError
  );
}

function translateNatsError(err: unknown, subject: string): AppError {
  const service = subject.split('.')[0];
  if (isNoResponders(err)) {
    return new AppError('SERVICE_UNAVAILABLE', `the ${service} service is not available`);
  }
  if (err instanceof errors.TimeoutError) {
    return new AppError('TIMEOUT', `the ${service} service did not answer in time`);
  }
  if (
    err instanceof errors.ClosedConnectionError ||
    err instanceof errors.DrainingConnectionError ||
    err instanceof errors.ConnectionError ||
    err instanceof errors.RequestError
  ) {
    return new AppError('SERVICE_UNAVAILABLE', 'the message bus is not connected');
  }
  return new AppError('INTERNAL', 'bus request failed');
}
