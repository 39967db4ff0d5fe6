import { z } from 'zod';
import { EpochMs, Id } from './common.js';

// ---- phone numbers (the telephony service keeps them; docs/api.md › Phone numbers) ----------------------

/** E.164: `+`, a country code that does not start with 0, at most 15 digits in all. */
export const E164 = z
  .string()
  .regex(/^\+[1-9][0-9]{1,14}$/, 'must be an E.164 number: +, the country code and the number, digits only');
export type E164 = z.infer<typeof E164>;

/** Telephony providers a number can be answered through. */
export const PhoneProvider = z.enum(['twilio']);
export type PhoneProvider = z.infer<typeof PhoneProvider>;

export const PhoneNumber = z.object({
  id: Id,
  number: E164,
  provider: PhoneProvider,
  /** The agent whose live deploy answers this number. */
  agentId: Id,
  createdAt: EpochMs,
  updatedAt: EpochMs,
});
export type PhoneNumber = z.infer<typeof PhoneNumber>;

export const PhoneNumberList = z.array(PhoneNumber);
export type PhoneNumberList = z.infer<typeof PhoneNumberList>;

export const CreatePhoneNumberBody = z
  .object({ number: E164, provider: PhoneProvider, agentId: Id })
  .strict();
export type CreatePhoneNumberBody = z.infer<typeof CreatePhoneNumberBody>;

/** Moves a number to another agent. */
export const UpdatePhoneNumberBody = z.object({ agentId: Id }).strict();
export type UpdatePhoneNumberBody = z.infer<typeof UpdatePhoneNumberBody>;

export const PhoneNumberParams = z.object({ id: Id });
export type PhoneNumberParams = z.infer<typeof PhoneNumberParams>;
