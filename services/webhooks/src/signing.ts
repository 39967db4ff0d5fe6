import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The `Vab-Signature` header of a delivery: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, with one
 * `v1=` per secret that signs (two during a rotation's overlap). A receiver checks that one `v1` matches its
 * secret and that `t` is recent (docs/api.md, "Verifying a delivery").
 */
export function signatureHeader(body: string, secrets: readonly string[], nowMs: number): string {
  const t = Math.floor(nowMs / 1000);
  return [`t=${t}`, ...secrets.map((s) => `v1=${hmacHex(s, `${t}.${body}`)}`)].join(',');
}

const hmacHex = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');

/** Whether `header` signs `body` with `secret` within `toleranceSeconds` of now (what a receiver does). */
export function verifySignature(
  header: string,
  body: string,
  secret: string,
  nowMs: number,
  toleranceSeconds = 300,
): boolean {
  const parts = header.split(',').map((p) => p.split('='));
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowMs / 1000 - t) > toleranceSeconds) return false;
  const expected = Buffer.from(hmacHex(secret, `${t}.${body}`));
  return parts.some(
    ([k, v]) =>
      k === 'v1' &&
      v !== undefined &&
      v.length === expected.length &&
      timingSafeEqual(Buffer.from(v), expected),
  );
}

/** A new signing secret: `whsec_` and 32 random bytes, base64url. */
export const newSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;
