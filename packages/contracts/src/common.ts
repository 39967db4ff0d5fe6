import { z } from 'zod';
import { AppError } from './errors.js';

/** Timestamps are integers in milliseconds since the Unix epoch (spec). */
export const EpochMs = z.number().int().nonnegative().max(8.64e15);
export type EpochMs = z.infer<typeof EpochMs>;

/** Ids we generate are UUIDs; anything else cannot exist, so it is rejected before storage is asked. */
export const Id = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_-]+$/, 'must be letters, digits, _ or -');
export type Id = z.infer<typeof Id>;

/** A value that can stand as one token of a NATS subject: no dot, no wildcard (`*`, `>`), no space. */
export const SUBJECT_TOKEN = /^[A-Za-z0-9_-]{1,200}$/;

/**
 * `value` when it is one subject token, else a VALIDATION_FAILED (400): every subject builder checks its own
 * parts, so no caller can put a client's text into a subject (a wildcard would subscribe to every session's
 * audio), whatever it checked before.
 */
export function subjectToken(value: string, what: string): string {
  if (SUBJECT_TOKEN.test(value)) return value;
  throw new AppError('VALIDATION_FAILED', `${what} must be 1–200 letters, digits, _ or -`);
}

export const AgentIdParams = z.object({ id: Id });
export type AgentIdParams = z.infer<typeof AgentIdParams>;

export const Ok = z.object({ ok: z.literal(true) });
export type Ok = z.infer<typeof Ok>;

/**
 * Provider keys by provider id (`openai`, `anthropic`, …). A missing, null or empty entry falls back to the
 * server's environment — except for a model the flow points at its own `baseURL` (see the readiness check).
 */
export const ApiKeys = z.record(z.string().max(100), z.string().max(2000).nullable());
export type ApiKeys = z.infer<typeof ApiKeys>;
