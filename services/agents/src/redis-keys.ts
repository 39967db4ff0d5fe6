/**
 * Redis key layout of the agents service (documented in ../README.md). Every key of one agent carries the
 * hash tag `{<id>}`, so on a Redis Cluster they share a slot and one script can update them atomically.
 */
export const keys = {
  agent: (id: string) => `ag:{${id}}`,
  versions: (id: string) => `ag:{${id}}:v`,
  content: (id: string, hash: string) => `ag:{${id}}:c:${hash}`,
  /**
   * The list's view: active agents by updatedAt, their list rows as JSON, and the rev of each agent's state
   * the view shows. Global keys sharing one hash tag (`{views}`), so VIEW updates them atomically on a
   * cluster too; ids are UUIDs, so no agent's tag can be `views`.
   */
  index: 'ag:{views}:index',
  summaries: 'ag:{views}:summaries',
  revs: 'ag:{views}:revs',
  /** Before the view had its own slot (one Redis only): moved by `repairViews` at start. */
  legacy: ['ag:index', 'ag:summaries'],
};

/** An agent's hash key, as SCAN finds it (its other keys carry a suffix). */
export const AGENT_KEY = /^ag:\{([^}]+)\}$/;
