import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, JetStreamApiError, Kvm, type KV } from '@vab/bus';
import { AppError } from '@vab/contracts';
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/**
 * The call token a Stream's TwiML carries as a `<Parameter>` (a Stream URL takes no query string): what opens
 * that call's media socket, once, within its TTL. HMAC-signed with a key derived from the Twilio auth token, so
 * every telephony instance accepts it with no new secret; its nonce is recorded in the JetStream KV bucket
 * `telephony-call-tokens` on use (`create` fails when the key exists), so it opens one socket across every
 * instance.
 */
export const CALL_TOKENS_BUCKET = 'telephony-call-tokens';

const VERSION = 't1';

/** What a call token says: the call (`callId`, hosted as the voice session of that id) of which agent, for which Twilio call. */
export const CallGrant = z.object({
  callId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  agentId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  callSid: z.string().max(64),
  /** The number called (E.164) and the caller's last 4 digits: what the call's record may keep. */
  to: z.string().max(20),
  from: z.string().max(20),
});
export type CallGrant = z.infer<typeof CallGrant>;

const Payload = CallGrant.extend({
  e: z.number().int(),
  n: z.string().regex(/^[A-Za-z0-9_-]{16,64}$/),
});

export interface CallTokens {
  mint(grant: CallGrant): string;
  /** The grant of a genuine, unexpired, unused token (used up now); false otherwise. */
  redeem(token: string): Promise<CallGrant | false>;
}

export function createCallTokens(opts: {
  authToken: string;
  ttlMs: number;
  markUsed: (nonce: string) => Promise<boolean>;
  now?: () => number;
}): CallTokens {
  const key = Buffer.from(hkdfSync('sha256', opts.authToken, 'vab-telephony', 'call-token-v1', 32));
  const now = opts.now ?? Date.now;
  const sign = (body: string) => createHmac('sha256', key).update(`${VERSION}.${body}`).digest();
  return {
    mint(grant) {
      const payload = { ...grant, e: now() + opts.ttlMs, n: randomBytes(18).toString('base64url') };
      const body = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${VERSION}.${body}.${sign(body).toString('base64url')}`;
    },
    async redeem(token) {
      if (token.length > 2048) return false;
      const [version, body, mac] = token.split('.');
      if (version !== VERSION || !body || !mac) return false;
      const expected = sign(body);
      const presented = Buffer.from(mac, 'base64url');
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return false;
      const parsed = Payload.safeParse(safeJson(Buffer.from(body, 'base64url').toString('utf8')));
      if (!parsed.success || parsed.data.e <= now()) return false;
      if (!(await opts.markUsed(parsed.data.n))) return false;
      const { e: _e, n: _n, ...grant } = parsed.data;
      return grant;
    },
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Used token nonces in the KV bucket, kept as long as a token lives (the bucket's TTL). A store that cannot be
 * reached refuses the socket (SERVICE_UNAVAILABLE), never lets a token through twice.
 */
export function kvUsedNonces(nc: NatsConnection, ttlMs: number): (nonce: string) => Promise<boolean> {
  let bucket: Promise<KV> | undefined;
  const open = (): Promise<KV> =>
    (bucket ??= (async () => {
      const kvm = new Kvm(nc);
      const options = { history: 1, ttl: ttlMs + 10_000 };
      try {
        return await kvm.create(CALL_TOKENS_BUCKET, options);
      } catch (err) {
        if (err instanceof JetStreamApiError) return kvm.open(CALL_TOKENS_BUCKET);
        throw err;
      }
    })().catch((err: unknown) => {
      bucket = undefined;
      throw err;
    }));
  const empty = new Uint8Array(0);
  return async (nonce) => {
    try {
      await (await open()).create(nonce, empty);
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
      throw new AppError('SERVICE_UNAVAILABLE', 'the call token store is unavailable', { cause: err });
    }
  };
}
