import { errors, headers as natsHeaders, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { AppError, ErrorBody, Headers, type RequestOf, type ResponseOf, type Subject } from '@vab/contracts';
import { decodeText, encodeJson } from './codec.js';

export interface RequestOptions {
  timeoutMs: number;
  requestId: string;
  /** The client's Idempotency-Key, for subjects that honour one. */
  idempotencyKey?: string | undefined;
}

export interface RawReply {
  /** The service's JSON reply, untouched, so the gateway can pass it on without re-serializing. */
  data: Uint8Array;
  headers: MsgHdrs | undefined;
}

/** Sends contract-typed requests; every failure becomes an AppError with a code the gateway can map. */
export class BusClient {
  private connected = true;

  constructor(private readonly nc: NatsConnection) {
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

  async requestRaw<S extends Subject>(
    subject: S,
    payload: RequestOf<S>,
    opts: RequestOptions,
  ): Promise<RawReply> {
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

  private async send(subject: string, payload: unknown, opts: RequestOptions): Promise<RawReply> {
    if (!this.isConnected()) throw new AppError('SERVICE_UNAVAILABLE', 'the message bus is not connected');
    const data = encodeJson(payload);
    const max = this.nc.info?.max_payload;
    if (max !== undefined && data.byteLength > max - 4096) {
      throw new AppError('PAYLOAD_TOO_LARGE', `request is larger than the bus payload limit (${max} bytes)`);
    }
    const h = natsHeaders();
    h.set(Headers.requestId, opts.requestId);
    if (opts.idempotencyKey) h.set(Headers.idempotencyKey, opts.idempotencyKey);
    let msg;
    try {
      msg = await this.nc.request(subject, data, { timeout: opts.timeoutMs, headers: h });
    } catch (err) {
      throw translateNatsError(err, subject);
    }
    if (msg.headers?.has(Headers.serviceErrorCode)) {
      throw errorFromReply(msg.data);
    }
    return { data: msg.data, headers: msg.headers };
  }

  async request<S extends Subject>(
    subject: S,
    payload: RequestOf<S>,
    opts: RequestOptions,
  ): Promise<ResponseOf<S>> {
    const reply = await this.requestRaw(subject, payload, opts);
    return JSON.parse(decodeText(reply.data)) as ResponseOf<S>;
  }
}

function errorFromReply(data: Uint8Array): AppError {
  try {
    const body = ErrorBody.parse(JSON.parse(decodeText(data)));
    return new AppError(body.code, body.message, { issues: body.issues, details: body.details });
  } catch {
    return new AppError('INTERNAL', 'malformed error reply from service');
  }
}

function translateNatsError(err: unknown, subject: string): AppError {
  const service = subject.split('.')[0];
  if (err instanceof errors.RequestError && err.isNoResponders()) {
    return new AppError('SERVICE_UNAVAILABLE', `the ${service} service is not available`);
  }
  if (err instanceof errors.NoRespondersError) {
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
