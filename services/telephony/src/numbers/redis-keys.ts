/**
 * Redis key layout of the telephony service (docs/architecture.md › Who owns what). Every number lives in two
 * hashes of one hash tag (`{numbers}`), so on a Redis Cluster they share a slot and one script keeps them
 * consistent: a number is held by one agent at a time, everywhere at once.
 */
export const keys = {
  /** id → the number's record (JSON). */
  byId: 'tp:{numbers}:by-id',
  /** E.164 number → id: what answers a call to `To`. */
  byNumber: 'tp:{numbers}:by-number',
};
