import {
  AppError,
  CallSettings,
  CredentialStatus,
  DEFAULT_CALL_SETTINGS,
  PUBLIC_KEY_PREFIX,
  PublicKey,
  SealedBlob,
  type CreatedPublicKey,
  type CreatePublicKeyBody,
  type StoreCredentialsRequest,
} from '@vab/contracts';
import type { RedisClient } from '@vab/storage';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { keys } from '../redis-keys.js';

const MAX_PUBLIC_KEYS = 50;
const hashOf = (key: string) => createHash('sha256').update(key).digest('hex');

/**
 * The agent's stored credentials (only ever sealed here: the playground seals and opens them), its
 * publishable keys (only their sha256 is kept: a key is shown once), and its call settings.
 */
export class LiveStore {
  constructor(private readonly redis: RedisClient) {}

  // ---- credentials ----

  async credentialStatus(agentId: string): Promise<CredentialStatus> {
    const h = await this.redis.hgetall(keys.credentials(agentId));
    return {
      apiKeys: h.status ? CredentialStatus.shape.apiKeys.parse(JSON.parse(h.status)) : {},
      updatedAt: h.updatedAt ? Number(h.updatedAt) : null,
    };
  }

  async sealed(agentId: string): Promise<SealedBlob | null> {
    const raw = await this.redis.hget(keys.credentials(agentId), 'sealed');
    return raw ? SealedBlob.parse(JSON.parse(raw)) : null;
  }

  async storeCredentials(req: StoreCredentialsRequest): Promise<CredentialStatus> {
    const key = keys.credentials(req.agentId);
    if (req.sealed === null) await this.redis.del(key);
    else {
      await this.redis.hset(key, {
        sealed: JSON.stringify(req.sealed),
        status: JSON.stringify(req.status),
        updatedAt: String(Date.now()),
      });
    }
    return this.credentialStatus(req.agentId);
  }

  // ---- publishable keys ----

  async createPublicKey(agentId: string, body: CreatePublicKeyBody): Promise<CreatedPublicKey> {
    if ((await this.redis.hlen(keys.publicKeys(agentId))) >= MAX_PUBLIC_KEYS) {
      throw new AppError('LIMIT_EXCEEDED', `an agent holds at most ${MAX_PUBLIC_KEYS} publishable keys`);
    }
    const key = `${PUBLIC_KEY_PREFIX}${randomBytes(24).toString('base64url')}`;
    const record: PublicKey = {
      id: randomUUID(),
      agentId,
      allowedOrigins: [...new Set(body.allowedOrigins.map((o) => o.toLowerCase()))],
      label: body.label ?? null,
      prefix: `${key.slice(0, 8)}…`,
      createdAt: Date.now(),
      revokedAt: null,
    };
    await this.redis.hset(keys.publicKeys(agentId), record.id, JSON.stringify(record));
    await this.redis.hset(keys.publicKeyHashes, hashOf(key), `${agentId}/${record.id}`);
    return { ...record, key };
  }

  async listPublicKeys(agentId: string): Promise<PublicKey[]> {
    const h = await this.redis.hgetall(keys.publicKeys(agentId));
    return Object.values(h)
      .map((v) => PublicKey.parse(JSON.parse(v)))
      .sort((a, b) => b.createdAt - a.createdAt);
  }

  async revokePublicKey(agentId: string, keyId: string): Promise<PublicKey> {
    const raw = await this.redis.hget(keys.publicKeys(agentId), keyId);
    if (!raw) throw new AppError('NOT_FOUND', `publishable key ${keyId} not found`);
    const record = PublicKey.parse(JSON.parse(raw));
    if (record.revokedAt !== null) return record;
    const revoked = { ...record, revokedAt: Date.now() };
    await this.redis.hset(keys.publicKeys(agentId), keyId, JSON.stringify(revoked));
    return revoked;
  }

  /** The key's record when it is a live key of `agentId` allowed from `origin`; null otherwise (one answer). */
  async verifyPublicKey(key: string, agentId: string, origin: string | undefined): Promise<PublicKey | null> {
    if (!key.startsWith(PUBLIC_KEY_PREFIX) || origin === undefined) return null;
    const ref = await this.redis.hget(keys.publicKeyHashes, hashOf(key));
    if (!ref) return null;
    const [owner, keyId] = ref.split('/');
    if (owner !== agentId || !keyId) return null;
    const raw = await this.redis.hget(keys.publicKeys(agentId), keyId);
    if (!raw) return null;
    const record = PublicKey.parse(JSON.parse(raw));
    if (record.revokedAt !== null) return null;
    return record.allowedOrigins.includes(origin.toLowerCase()) ? record : null;
  }

  // ---- call settings ----

  async callSettings(agentId: string): Promise<CallSettings> {
    const raw = await this.redis.get(keys.callSettings(agentId));
    return raw ? CallSettings.parse({ ...DEFAULT_CALL_SETTINGS, ...JSON.parse(raw) }) : DEFAULT_CALL_SETTINGS;
  }

  async setCallSettings(agentId: string, patch: Partial<CallSettings>): Promise<CallSettings> {
    const next = { ...(await this.callSettings(agentId)), ...patch };
    await this.redis.set(keys.callSettings(agentId), JSON.stringify(next));
    return next;
  }
}
