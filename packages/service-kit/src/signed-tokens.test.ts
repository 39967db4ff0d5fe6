import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSignedTokens } from './signed-tokens.js';

const Claims = z.object({ path: z.string().max(20) });
const key = randomBytes(32);

describe('signed tokens', () => {
  it('open what the same key and version made, with its claims and nonce, until it expires', () => {
    let now = 1_000_000;
    const tokens = createSignedTokens({ key, version: 'x1', claims: Claims, maxLength: 512, now: () => now });
    const { token, expiresAt } = tokens.mint({ path: '/a' }, 30_000);
    expect(expiresAt).toBe(1_030_000);
    const opened = tokens.open(token);
    expect(opened?.claims).toEqual({ path: '/a' });
    expect(opened?.nonce).toMatch(/^[A-Za-z0-9_-]{24}$/);
    // every instance with the key opens it; nonces differ token to token
    const other = createSignedTokens({ key, version: 'x1', claims: Claims, maxLength: 512, now: () => now });
    expect(other.open(token)).toEqual(opened);
    expect(tokens.open(tokens.mint({ path: '/a' }, 30_000).token)?.nonce).not.toBe(opened?.nonce);
    now = expiresAt;
    expect(tokens.open(token)).toBeUndefined();
  });

  it('refuse another key, another version, an altered body, claims off their schema, and an overlong token', () => {
    const make = (over: { key?: Buffer; version?: string; maxLength?: number } = {}) =>
      createSignedTokens({ key, version: 'x1', claims: Claims, maxLength: 512, ...over });
    const { token } = make().mint({ path: '/a' }, 30_000);
    expect(make({ key: randomBytes(32) }).open(token)).toBeUndefined();
    expect(make({ version: 'x2' }).open(token.replace(/^x1/, 'x2'))).toBeUndefined();
    expect(make({ maxLength: token.length - 1 }).open(token)).toBeUndefined();
    const [version, body, mac] = token.split('.');
    const claims = JSON.parse(Buffer.from(body!, 'base64url').toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, path: '/b' })).toString('base64url');
    expect(make().open(`${version}.${forged}.${mac}`)).toBeUndefined();
    // signed, but not what the schema allows: refused all the same
    const long = make().mint({ path: 'x'.repeat(21) }, 30_000);
    expect(make().open(long.token)).toBeUndefined();
    expect(make().open('x1.not-a-token')).toBeUndefined();
    expect(make().open('')).toBeUndefined();
  });
});
