// NATS JetStream key-value, for the few cross-instance facts the edge keeps (the gateway's used tickets),
// and JetStream's API errors, matched by their codes (never by a class name or a message).
import { JetStreamApiError, type JetStreamApiCodes } from '@nats-io/jetstream';
export { Kvm, type KV } from '@nats-io/kv';
export { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';

/** Whether `err` is JetStream's answer with one of `codes` (its `err_code`, e.g. StreamNotFound 10059). */
export function isJetStreamError(err: unknown, ...codes: JetStreamApiCodes[]): err is JetStreamApiError {
  return err instanceof JetStreamApiError && (codes as number[]).includes(err.code);
}
