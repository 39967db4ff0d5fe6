import type { NatsConnection } from '@nats-io/transport-node';
import { kvUsedOnce } from '@vab/bus';
import { createSignedTokens } from '@vab/service-kit';
import { hkdfSync } from 'node:crypto';
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
  const tokens = createSignedTokens({
    key: Buffer.from(hkdfSync('sha256', opts.authToken, 'vab-telephony', 'call-token-v1', 32)),
    version: VERSION,
    claims: CallGrant,
    maxLength: 2048,
    now: opts.now,
  });
  return {
    mint: (grant) => tokens.mint(grant, opts.ttlMs).token,
    async redeem(token) {
      const opened = tokens.open(token);
      if (!opened || !(await opts.markUsed(opened.nonce))) return false;
      return opened.claims;
    },
  };
}

/**
 * Used token nonces in the KV bucket, kept as long as a token lives (the bucket's TTL). A store that cannot be
 * reached refuses the socket (SERVICE_UNAVAILABLE), never lets a token through twice.
 */
export function kvUsedNonces(nc: NatsConnection, ttlMs: number): (nonce: string) => Promise<boolean> {
  return kvUsedOnce(nc, {
    bucket: CALL_TOKENS_BUCKET,
    ttlMs,
    unavailable: 'the call token store is unavailable',
  });
}
