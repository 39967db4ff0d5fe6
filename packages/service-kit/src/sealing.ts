import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/**
 * Secrets sealed at rest with AES-256-GCM (a webhook's signing secret; any service that keeps a credential in
 * its store). A sealed value names the key that sealed it (the first 8 hex of its SHA-256), so the operator
 * rotates by putting a new current key and listing the old ones until everything was sealed again: a value
 * sealed by an old key still opens. The key never leaves the process; the sealed text is all the store holds.
 */
export class SecretBox {
  private readonly byId = new Map<string, Buffer>();
  private readonly currentId: string;

  constructor(current: Buffer, old: readonly Buffer[] = []) {
    for (const key of [current, ...old]) {
      if (key.length !== 32) throw new Error('a sealing key is 32 bytes');
      this.byId.set(keyIdOf(key), key);
    }
    this.currentId = keyIdOf(current);
  }

  /** `v1.<key id>.<iv>.<tag>.<ciphertext>`, base64url parts; a fresh 12-byte IV each time. */
  seal(plain: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.byId.get(this.currentId)!, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', this.currentId, iv, cipher.getAuthTag(), body]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
  }

  /** The plain text; throws when the value was not sealed by a known key or was altered. */
  unseal(sealed: string): string {
    const [version, id, iv, tag, body] = sealed.split('.');
    const key = id === undefined ? undefined : this.byId.get(id);
    if (version !== 'v1' || !key || iv === undefined || tag === undefined || body === undefined) {
      throw new Error('sealed with an unknown key or format');
    }
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString(
      'utf8',
    );
  }
}

const keyIdOf = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 8);

/**
 * A sealing key as an operator writes it: 32 bytes as 64 hex digits or as base64 (`openssl rand -base64 32`).
 * Throws with what is wrong, never with the value.
 */
export function parseSealingKey(text: string): Buffer {
  const t = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes, as 64 hex digits or base64');
  return key;
}
