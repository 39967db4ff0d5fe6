/**
 * Redis key layout of the webhooks service (documented in ../README.md). An agent's keys share the hash tag
 * `{<agentId>}` (one slot on a Redis Cluster); the schedule of due deliveries is one key of its own slot.
 */
export const keys = {
  /** Hash: webhook id → endpoint record (JSON, its secrets sealed). */
  endpoints: (agentId: string) => `wh:{${agentId}}:endpoints`,
  /** Hash: webhook id → failed attempts in a row. */
  fails: (agentId: string) => `wh:{${agentId}}:fails`,
  /** Hash: webhook id → the failing report (JSON), while the endpoint keeps failing. */
  failing: (agentId: string) => `wh:{${agentId}}:failing`,
  /** String: one delivery's record (JSON, with the event's body), expiring with the retention. */
  delivery: (agentId: string, deliveryId: string) => `wh:{${agentId}}:d:${deliveryId}`,
  /** Sorted set: an endpoint's delivery ids by creation time (the newest 1000). */
  log: (agentId: string, webhookId: string) => `wh:{${agentId}}:log:${webhookId}`,
  /** Sorted set: an endpoint's pending delivery ids in the order of their events (DOMAIN_EVENTS' sequence). */
  pending: (agentId: string, webhookId: string) => `wh:{${agentId}}:pending:${webhookId}`,
  /**
   * Hash: webhook id → 1 while its deliveries go one at a time, oldest first (from its first failed attempt
   * until its pending set is empty): a receiver that was down gets its backlog in the order of the events.
   */
  serial: (agentId: string) => `wh:{${agentId}}:serial`,
  /** Set: the deliveries of one call's events (an erased call cancels its pending ones). */
  call: (agentId: string, callId: string) => `wh:{${agentId}}:call:${callId}`,
  /** Sorted set: `<agentId>/<deliveryId>` by when its next attempt is due (or its claim runs out). */
  due: 'wh:{due}',
};
