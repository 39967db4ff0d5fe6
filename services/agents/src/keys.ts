/**
 * Redis key layout of the agents service (documented in ../README.md). Every key of one agent carries the
 * hash tag `{<id>}`, so on a Redis Cluster they share a slot and one script can update them atomically.
 */
export const keys = {
  agent: (id: string) => `ag:{${id}}`,
  versions: (id: string) => `ag:{${id}}:v`,
  content: (id: string, hash: string) => `ag:{${id}}:c:${hash}`,
  /** Active agents by updatedAt. A single global key: on a cluster it lives in its own slot (see README). */
  index: 'ag:index',
  /** The list's row of each active agent as JSON, by id: a derived view kept next to the index. */
  summaries: 'ag:summaries',
};
