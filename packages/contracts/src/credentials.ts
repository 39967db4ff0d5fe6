import { z } from 'zod';
import { EpochMs, Id } from './common.js';
import { SealedBlob } from './calls.js';

/**
 * Stored provider credentials (issue 45): the builder's own keys, for callers who bring none. Sealed with
 * AES-256-GCM under the operator's CREDENTIALS_KEY by the playground, kept sealed by the sessions service,
 * opened only by the playground at a call's start (and a deploy's readiness check). Never in a reply, log,
 * trace, event, metric or recording: a reply says `{ set: true, last4 }`.
 */
export const CREDENTIAL_PROVIDERS = [
  'openai',
  'deepgram',
  'elevenlabs',
  'anthropic',
  'groq',
  'google',
] as const;
export const CredentialProvider = z.enum(CREDENTIAL_PROVIDERS);
export type CredentialProvider = z.infer<typeof CredentialProvider>;

const keyValue = z.string().trim().min(1).max(2000).nullable().optional();

/** `PUT /api/agents/:id/credentials`: merged into what is stored; `null` removes a provider's key. */
export const PutCredentialsBody = z
  .object({
    apiKeys: z
      .object({
        openai: keyValue,
        deepgram: keyValue,
        elevenlabs: keyValue,
        anthropic: keyValue,
        groq: keyValue,
        google: keyValue,
      })
      .strict(),
  })
  .strict();
export type PutCredentialsBody = z.infer<typeof PutCredentialsBody>;

export const CredentialState = z.object({ set: z.literal(true), last4: z.string().max(4) });
export type CredentialState = z.infer<typeof CredentialState>;

/** What `GET`/`PUT …/credentials` answer: which providers have a key, and its last 4 characters. */
export const CredentialStatus = z.object({
  apiKeys: z.object({
    openai: CredentialState.optional(),
    deepgram: CredentialState.optional(),
    elevenlabs: CredentialState.optional(),
    anthropic: CredentialState.optional(),
    groq: CredentialState.optional(),
    google: CredentialState.optional(),
  }),
  updatedAt: EpochMs.nullable(),
});
export type CredentialStatus = z.infer<typeof CredentialStatus>;

/** What the playground seals: the keys by provider (decrypted only in its memory). */
export const OpenedCredentials = z.partialRecord(CredentialProvider, z.string());
export type OpenedCredentials = z.infer<typeof OpenedCredentials>;

/** `sessions.credentials.store`: the playground stores a new sealed blob with its status. */
export const StoreCredentialsRequest = z.object({
  agentId: Id,
  /** null: nothing is stored any more. */
  sealed: SealedBlob.nullable(),
  status: CredentialStatus.shape.apiKeys,
});
export type StoreCredentialsRequest = z.infer<typeof StoreCredentialsRequest>;

export const SealedCredentials = z.object({ sealed: SealedBlob.nullable() });
export type SealedCredentials = z.infer<typeof SealedCredentials>;

// ---- publishable keys --------------------------------------------------------------------------

/**
 * A publishable key (`pk_…`): lets a page on one of its origins start calls of its agent's live deploy (sent as
 * `Authorization: Bearer pk_…` on `/live` routes only; useless anywhere else). Stored as a hash: shown once.
 */
export const PUBLIC_KEY_PREFIX = 'pk_';

/** An origin as a browser sends it: scheme, host and an optional port, nothing else. */
export const Origin = z
  .string()
  .max(300)
  .regex(/^https?:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?$/, 'must be an origin: http(s)://host[:port], no path');

export const CreatePublicKeyBody = z
  .object({
    /** The pages allowed to use it (`Origin` header); at most 10, like ElevenLabs' widget hosts. */
    allowedOrigins: z.array(Origin).min(1).max(10),
    label: z.string().trim().max(100).optional(),
  })
  .strict();
export type CreatePublicKeyBody = z.infer<typeof CreatePublicKeyBody>;

export const PublicKey = z.object({
  id: Id,
  agentId: Id,
  allowedOrigins: z.array(z.string()),
  label: z.string().nullable(),
  /** Its first characters (`pk_ab12…`), to tell keys apart. */
  prefix: z.string(),
  createdAt: EpochMs,
  revokedAt: EpochMs.nullable(),
});
export type PublicKey = z.infer<typeof PublicKey>;

/** The answer of a create: the record and, this once, the key itself. */
export const CreatedPublicKey = PublicKey.extend({ key: z.string() });
export type CreatedPublicKey = z.infer<typeof CreatedPublicKey>;

export const PublicKeyList = z.object({ keys: z.array(PublicKey) });
export type PublicKeyList = z.infer<typeof PublicKeyList>;

export const PublicKeyParams = z.object({ id: Id, keyId: Id });
export type PublicKeyParams = z.infer<typeof PublicKeyParams>;

/**
 * `sessions.public-keys.verify` (the gateway, on `/live` routes): is this key valid for this subdomain's agent
 * from this origin? UNAUTHORIZED otherwise (one answer for unknown, revoked, other agent's, wrong origin).
 */
export const VerifyPublicKeyRequest = z.object({
  key: z.string().max(200),
  subdomain: z.string().min(1).max(100),
  /** The request's `Origin` header; absent: refused (a key is for pages). */
  origin: z.string().max(300).optional(),
});
export type VerifyPublicKeyRequest = z.infer<typeof VerifyPublicKeyRequest>;

export const VerifiedPublicKey = z.object({ keyId: Id, agentId: Id });
export type VerifiedPublicKey = z.infer<typeof VerifiedPublicKey>;
