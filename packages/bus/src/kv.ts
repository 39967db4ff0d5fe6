// NATS JetStream key-value, for the few cross-instance facts the edge keeps (the gateway's used tickets,
// telephony's used call tokens), and JetStream's API errors, matched by their codes (never by a class name or
// a message).
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { AppError } from '@vab/contracts';
export { Kvm, type KV } from '@nats-io/kv';
export { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';

/** Whether `err` is JetStream's answer with one of `codes` (its `err_code`, e.g. StreamNotFound 10059). */
export function isJetStreamError(err: unknown, ...codes: JetStreamApiCodes[]): err is JetStreamApiError {
  return err instanceof JetStreamApiError && (codes as number[]).includes(err.code);
}

/**
 * The KV bucket `name`, made on first use with `options`, or opened as it is when another instance made it
 * first (perhaps with other options: docs/operations.md says to share it). A failure is not kept: the next call
 * tries again.
 */
export function lazyKvBucket(
  nc: NatsConnection,
  name: string,
  options: Parameters<Kvm['create']>[1],
): () => Promise<KV> {
  let bucket: Promise<KV> | undefined;
  return () =>
    (bucket ??= (async () => {
      const kvm = new Kvm(nc);
      try {
        return await kvm.create(name, options);
      } catch (err) {
        if (err instanceof JetStreamApiError) return kvm.open(name);
        throw err;
      }
    })().catch((err: unknown) => {
      bucket = undefined;
      throw err;
    }));
}

/**
 * Ids used once across every instance (a ticket's, a call token's nonce): `markUsed(id)` is true the first
 * time, false ever after. Each id is a key of the KV bucket `bucket`, created with `create` (which fails when
 * the key exists) and kept a margin over `ttlMs` (the bucket's TTL), so the bucket holds only the ids of what
 * is still alive. A store that cannot be reached answers SERVICE_UNAVAILABLE (`unavailable` its message):
 * never lets an id through twice.
 */
export function kvUsedOnce(
  nc: NatsConnection,
  opts: { bucket: string; ttlMs: number; unavailable: string },
): (id: string) => Promise<boolean> {
  // a margin over the lifetime: an id is remembered until well after its token stops being accepted
  const open = lazyKvBucket(nc, opts.bucket, { history: 1, ttl: opts.ttlMs + 10_000 });
  const empty = new Uint8Array(0);
  return async (id) => {
    try {
      await (await open()).create(id, empty);
      return true;
    } catch (err) {
      if (
        isJetStreamError(
          err,
          JetStreamApiCodes.StreamWrongLastSequence,
          JetStreamApiCodes.StreamWrongLastSequenceUnknown,
        )
      )
        return false;
      throw new AppError('SERVICE_UNAVAILABLE', opts.unavailable, { cause: err });
    }
  };
}
