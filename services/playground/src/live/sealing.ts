import { AppError, type SealedBlob } from '@vab/contracts';
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

/** A sealing key as the operator writes it (64 hex digits or base64 of 32 bytes), or null. */
export function parseSealingKey(text: string): Buffer | null {
  const t = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  return bytes.length === 32 ? bytes : null;
}

/** A key's id on a blob: the first 16 hex digits of its SHA-256 (names the key, reveals nothing of it). */
const idOf = (key: Buffer) => createHash('sha256').update(key).digest('hex').slice(0, 16);

/**
 * Seals and opens the agents' stored credentials with AES-256-GCM under the operator's key (CREDENTIALS_KEY
 * or CREDENTIALS_KEY_FILE). The agent's id is the additional data: a blob copied to another agent does not
 * open. Rotation: the new key seals; the old ones (CREDENTIALS_OLD_KEYS) still open what they sealed, and a
 * blob is sealed again under the new key at its agent's next `PUT …/credentials` (docs/operations.md).
 */
export class Sealer {
  private readonly current: { id: string; key: Buffer } | null;
  private readonly byId = new Map<string, Buffer>();

  constructor(config: { key?: string | undefined; oldKeys?: string | undefined }) {
    const key = config.key ? parseSealingKey(config.key) : null;
    this.current = key ? { id: idOf(key), key } : null;
    for (const k of [
      key,
      ...(config.oldKeys ?? '').split(',').map((t) => (t.trim() ? parseSealingKey(t) : null)),
    ])
      if (k) this.byId.set(idOf(k), k);
  }

  get configured(): boolean {
    return this.current !== null;
  }

  seal(agentId: string, value: unknown): SealedBlob {
    if (!this.current) {
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        'stored credentials need the operator to set CREDENTIALS_KEY',
      );
    }
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
    cipher.setAAD(Buffer.from(agentId));
    const data = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return {
      keyId: this.current.id,
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      data: data.toString('base64'),
    };
  }

  /** The sealed value; an error naming no key material when the key is unknown or the blob altered. */
  open(agentId: string, blob: SealedBlob): unknown {
    const key = this.byId.get(blob.keyId);
    if (!key) {
      throw new AppError(
        'SERVICE_UNAVAILABLE',
        `the stored credentials were sealed with a key this server lacks`,
      );
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(blob.iv, 'base64'));
      decipher.setAAD(Buffer.from(agentId));
      decipher.setAuthTag(Buffer.from(blob.tag, 'base64'));
      const text = Buffer.concat([decipher.update(Buffer.from(blob.data, 'base64')), decipher.final()]);
      return JSON.parse(text.toString('utf8'));
    } catch (err) {
      throw new AppError('INTERNAL', 'the stored credentials do not open', { cause: err });
    }
  }
}
