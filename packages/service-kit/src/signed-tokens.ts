import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/**
 * Short-lived tokens an edge hands out and takes back itself (the gateway's tickets, telephony's call tokens):
 * `<version>.<body>.<mac>`, base64url, the body the claims as JSON with an expiry (`e`, epoch ms) and a random
 * nonce (`n`), the MAC an HMAC-SHA256 of `<version>.<body>`. Every instance holding the same key accepts what
 * another made, with no store; what makes one single-use is the caller's (it records `nonce`, e.g. in a KV
 * bucket: `kvUsedOnce` of @vab/bus).
 */
export interface SignedTokens<Claims> {
  mint(claims: Claims, ttlMs: number): { token: string; expiresAt: number };
  /** The claims and nonce of a genuine, unexpired token of this version; undefined for anything else. */
  open(token: string): { claims: Claims; nonce: string } | undefined;
}

/** A token's own fields beside its claims: its expiry and its nonce. */
const Envelope = z.object({ e: z.number().int(), n: z.string().regex(/^[A-Za-z0-9_-]{16,64}$/) });

export function createSignedTokens<S extends z.ZodObject>(opts: {
  /** The HMAC key: derived from a secret every instance has (HKDF), never the secret itself. */
  key: Buffer;
  /** The token's first part: a token of another version, or another kind, is refused. */
  version: string;
  /** The claims' schema; `e` and `n` are the token's own. */
  claims: S;
  /** Longer tokens are refused unread. */
  maxLength: number;
  now?: () => number;
}): SignedTokens<z.infer<S>> {
  const now = opts.now ?? Date.now;
  const sign = (body: string) => createHmac('sha256', opts.key).update(`${opts.version}.${body}`).digest();
  return {
    mint(claims, ttlMs) {
      const expiresAt = now() + ttlMs;
      const n = randomBytes(18).toString('base64url');
      const body = Buffer.from(JSON.stringify({ ...claims, e: expiresAt, n })).toString('base64url');
      return { token: `${opts.version}.${body}.${sign(body).toString('base64url')}`, expiresAt };
    },
    open(token) {
      if (token.length > opts.maxLength) return undefined;
      const [version, body, mac] = token.split('.');
      if (version !== opts.version || !body || !mac) return undefined;
      const expected = sign(body);
      const presented = Buffer.from(mac, 'base64url');
      if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
      const json = jsonOrUndefined(Buffer.from(body, 'base64url').toString('utf8'));
      const own = Envelope.safeParse(json);
      const claims = opts.claims.safeParse(json);
      if (!own.success || !claims.success || own.data.e <= now()) return undefined;
      return { claims: claims.data, nonce: own.data.n };
    },
  };
}

function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
