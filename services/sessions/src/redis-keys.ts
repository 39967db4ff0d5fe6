/**
 * Redis key layout of the sessions service (documented in ../README.md). All keys of one agent share the
 * hash tag `{<agentId>}` so a script can update them atomically on a Redis Cluster too.
 */
export const keys = {
  conversation: (agentId: string) => `ss:{${agentId}}:conv`,
  sessions: (agentId: string) => `ss:{${agentId}}:ts`,
  session: (agentId: string, sessionId: string) => `ss:{${agentId}}:ts:${sessionId}`,
  messages: (agentId: string, sessionId: string) => `ss:{${agentId}}:ts:${sessionId}:msg`,
  /** Stats hashes (stats/histogram.ts): one per agent version, one per UTC day (yyyymmdd). */
  versionStats: (agentId: string, version: number) => `ss:{${agentId}}:st:v:${version}`,
  dayStats: (agentId: string, day: string) => `ss:{${agentId}}:st:d:${day}`,
  deploys: (agentId: string) => `ss:{${agentId}}:dep`,
  deployPrefix: (agentId: string) => `ss:{${agentId}}:dep:`,
  deploy: (agentId: string, deployId: string) => `ss:{${agentId}}:dep:${deployId}`,
  deployMeta: (agentId: string) => `ss:{${agentId}}:depmeta`,
  /** Decision 0035: the side of a canary a caller (its keyed hash) was drawn on; TTL `CANARY_STICKY_MS`. */
  canarySide: (agentId: string, canaryId: string, callerKey: string) =>
    `ss:{${agentId}}:canary:${canaryId}:${callerKey}`,
  cases: (agentId: string) => `ss:{${agentId}}:tc`,
  case: (agentId: string, caseId: string) => `ss:{${agentId}}:tc:${caseId}`,
  runs: (agentId: string) => `ss:{${agentId}}:tr`,
  run: (agentId: string, runId: string) => `ss:{${agentId}}:tr:${runId}`,
  /** Test runs being driven, `<agentId>/<runId>` by their driver's deadline: what the stale-run sweep reads. */
  activeRuns: 'ss:{runs}:active',
  /**
   * Test sessions not closed yet, `<agentId>/<sessionId>` by their start: what the owner sweep reads (a
   * session whose playground instance is gone is closed by it). Its own slot on a cluster.
   */
  openSessions: 'ss:{open}:sessions',
  /**
   * Deploys the pipeline moves, `<agentId>/<deployId>` by their creation, until they leave pending/building:
   * what the deploy sweep reads (one whose pipeline's instance died is failed). Its own slot on a cluster.
   */
  pipelineDeploys: 'ss:{deploys}:pipeline',
  /**
   * Every running canary, `<agentId>/<deployId>` by when the deploy sweep judges it next (its window's end at
   * the latest): the sweep rolls back a worse one and promotes one whose window is over, whether or not an
   * instance that would have (at a call's end or analysis) is still there. Left once the canary's end is
   * announced, or when the sweep finds it superseded or stopped. Its own slot on a cluster.
   */
  canaries: 'ss:{deploys}:canaries',
  /**
   * The previous version's index of canaries with a window (by the window's end): the deploy sweep moves what
   * an instance of that version still writes there into `canaries` (a rolling upgrade).
   */
  legacyCanaryWindows: 'ss:{deploys}:windows',
  /**
   * Decision 0035: the canary judge's figures of the agent's running canary (an agent runs one at a time),
   * kept as its and the live deploy's calls change (calls-store.ts): a hash (`since`, `canary` — the canary
   * they are of, `live`, `seeded`) and, per side (`c` canary, `l` live), the ids of the calls started since it
   * went canary whose analysis passed (`:c:pass`), failed (`:c:fail`), and the ended ones that measured the
   * caller's wait scored by their p50 (`:c:timed`, a sorted set). Deleted with the canary's end, and by the next
   * canary's start (scripts.ts). Fixed names, so that every script that touches them is passed all seven in
   * KEYS: a Redis Cluster moving the agent's slot refuses such a script before it writes, never half-way.
   * (Not yet so of UPDATE_DEPLOY and STOP_DEPLOY, scripts.ts: they read and write the agent's other deploys'
   * hashes by the ids its meta names, so a move made while the slot migrates can fail after a first write.)
   */
  canaryCounts: (agentId: string) => `ss:{${agentId}}:cj`,
  /** The figures' seven keys, in the order the scripts take them: the hash, then `c:`, `l:` × pass, fail, timed. */
  canaryCountKeys: (agentId: string): string[] => {
    const h = `ss:{${agentId}}:cj`;
    return [h, `${h}:c:pass`, `${h}:c:fail`, `${h}:c:timed`, `${h}:l:pass`, `${h}:l:fail`, `${h}:l:timed`];
  },
  /**
   * The previous version's figures of canary `<canaryId>` (`ss:{<agentId>}:cj:<canaryId>` and its six sets, the
   * same suffixes): read by no one now; the backfill deletes those of the canaries still running.
   */
  legacyCanaryCountKeys: (agentId: string, canaryId: string): string[] => {
    const h = `ss:{${agentId}}:cj:${canaryId}`;
    return [h, `${h}:c:pass`, `${h}:c:fail`, `${h}:c:timed`, `${h}:l:pass`, `${h}:l:fail`, `${h}:l:timed`];
  },
  /** Issue 45: the agent's stored credentials (sealed blob, status), publishable keys, call settings. */
  credentials: (agentId: string) => `ss:{${agentId}}:cred`,
  publicKeys: (agentId: string) => `ss:{${agentId}}:pk`,
  callSettings: (agentId: string) => `ss:{${agentId}}:callset`,
  /** sha256 of a publishable key → `<agentId>/<keyId>` (own slot on a cluster). */
  publicKeyHashes: 'ss:pkhash',
  /** subdomain → agentId, global so a subdomain is unique across agents (own slot on a cluster). */
  subdomains: 'ss:subdomains',
};

/** An agent's test-session index, as SCAN finds it. */
export const SESSIONS_KEY = /^ss:\{([^}]+)\}:ts$/;

/** Message members are `<seq, 10 digits>|<json>`: equal timestamps then sort in arrival order. */
export const SEQ_WIDTH = 10;
