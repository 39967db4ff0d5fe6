import { createHash } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  isJetStreamError,
  JetStreamApiCodes,
  JetStreamApiError,
  Kvm,
  safeError,
  type KV,
  type Logger,
} from '@vab/bus';

/** The JetStream key-value bucket of the callers' session slots, shared by every playground instance. */
export const CALLER_SLOTS_BUCKET = 'playground-callers';

export interface CallerSlotsConfig {
  /** Slots per caller (MAX_SESSIONS_PER_CALLER); 0: no quota. */
  quota: number;
  /** A slot lives this long unless its owner renews it: what a crashed instance's slots are freed after. */
  leaseMs: number;
}

/** A caller's slot, held by one session; renewed while it runs. */
export interface CallerSlot {
  release(): Promise<void>;
}

/**
 * The per-caller quota across playground instances: each caller has `quota` slots, keys `<caller>.<i>` in a
 * JetStream KV bucket, and a session takes one with `create` (which fails when the key exists), so two starts
 * on two instances can never take the same slot. Keys carry the bucket's TTL and the owner renews its slot
 * (compare-and-set on its revision), so an instance that dies frees its callers' slots within `leaseMs`, with
 * no sweep. The caller's identity is hashed into the key (it may be an address; it is never a token).
 */
export class CallerSlots {
  private bucket: Promise<KV> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly config: CallerSlotsConfig,
    private readonly log: Logger,
  ) {}

  /**
   * A slot of `caller`'s, or false when all are held. Undefined when the quota cannot be checked (JetStream
   * unavailable): the start goes on, checked by its instance's own count alone.
   */
  async take(caller: string, holder: string): Promise<CallerSlot | false | undefined> {
    let kv: KV;
    try {
      kv = await this.open();
    } catch (err) {
      this.unchecked(err);
      return undefined;
    }
    const prefix = createHash('sha256').update(caller).digest('hex').slice(0, 32);
    const value = new TextEncoder().encode(holder);
    for (let i = 0; i < this.config.quota; i++) {
      const key = `${prefix}.${i}`;
      let revision: number;
      try {
        revision = await kv.create(key, value);
      } catch (err) {
        if (taken(err)) continue;
        this.unchecked(err);
        return undefined;
      }
      return this.held(kv, key, value, revision);
    }
    return false;
  }

  private held(kv: KV, key: string, value: Uint8Array, first: number): CallerSlot {
    let revision = first;
    let released = false;
    const renew = setInterval(
      () =>
        void kv.update(key, value, revision).then(
          (next) => (revision = next),
          (err: unknown) => {
            // lost (expired while this process stalled, then taken): the session runs on, uncounted
            clearInterval(renew);
            if (!released) this.log.debug({ err: safeError(err) }, 'caller slot lost');
          },
        ),
      Math.max(250, Math.floor(this.config.leaseMs / 3)),
    );
    renew.unref();
    return {
      release: async () => {
        if (released) return;
        released = true;
        clearInterval(renew);
        await kv.delete(key, { previousSeq: revision }).catch(() => undefined);
      },
    };
  }

  private open(): Promise<KV> {
    const kvm = new Kvm(this.nc);
    this.bucket ??= kvm
      .create(CALLER_SLOTS_BUCKET, { history: 1, ttl: this.config.leaseMs })
      // another instance made it with another lease: used as it is (operations.md says to keep them equal)
      .catch((err: unknown) =>
        err instanceof JetStreamApiError ? kvm.open(CALLER_SLOTS_BUCKET) : Promise.reject(err),
      )
      .catch((err: unknown) => {
        this.bucket = undefined;
        throw err;
      });
    return this.bucket;
  }

  private unchecked(err: unknown): void {
    this.log.warn(
      { code: 'CALLER_QUOTA_UNCHECKED', err: safeError(err) },
      'caller quota not checked across instances; this instance counts alone',
    );
  }
}

/** `create` on a key that exists (not deleted): JetStream's "wrong last sequence". */
const taken = (err: unknown) =>
  isJetStreamError(
    err,
    JetStreamApiCodes.StreamWrongLastSequence,
    JetStreamApiCodes.StreamWrongLastSequenceUnknown,
  );
