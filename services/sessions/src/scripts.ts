/**
 * KEYS: conversation list. ARGV: entryJson, maxEntries. Appends; beyond maxEntries the oldest go, at most
 * 1,000 per append (a lowered cap is reached over a few appends, never in one long command).
 */
export const APPEND_ENTRY = `
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
local over = n - tonumber(ARGV[2])
if over > 0 then redis.call('LTRIM', KEYS[1], math.min(over, 1000), -1) end
return n
`;

/**
 * Adds a stats delta (JSON: \`{ incr, fincr, max }\`, see stats/histogram.ts) to every stats hash in
 * KEYS[from..], and gives each the retention TTL (seconds; 0 = none). Inside the script that writes what the
 * figures come from, so a figure is counted exactly when its message or close is stored.
 */
const APPLY_STATS = `
local function applyStats(from, delta, ttl)
  local d = cjson.decode(delta)
  for i = from, #KEYS do
    local k = KEYS[i]
    for f, n in pairs(d.incr) do redis.call('HINCRBY', k, f, n) end
    for f, n in pairs(d.fincr) do redis.call('HINCRBYFLOAT', k, f, tostring(n)) end
    for f, n in pairs(d.max) do
      local had = tonumber(redis.call('HGET', k, f))
      if not had or n > had then redis.call('HSET', k, f, tostring(n)) end
    end
    if tonumber(ttl) > 0 then redis.call('EXPIRE', k, ttl) end
  end
end`;

/**
 * KEYS: session hash, messages zset, then the stats hashes the message counts in (if any). ARGV: timestamp,
 * messageJson, maxMessages, [stats delta JSON, TTL seconds]. Returns the arrival seq.
 */
export const APPEND_MESSAGE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return redis.error_reply('NOT_FOUND') end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return redis.error_reply('LIMIT_EXCEEDED') end
local seq = redis.call('HINCRBY', KEYS[1], 'msgSeq', 1)
redis.call('ZADD', KEYS[2], ARGV[1], string.format('%010d', seq) .. '|' .. ARGV[2])
${APPLY_STATS}
if ARGV[4] then applyStats(3, ARGV[4], ARGV[5]) end
return seq
`;

/**
 * KEYS: session hash, then the stats hashes the session counts in. ARGV: endedAt, durationMs, [usage JSON,
 * stats delta JSON, TTL seconds]. open → closed (usage and errors are counted once, on that transition);
 * closing again with the same values is a no-op, with other values a conflict.
 */
export const CLOSE_SESSION = `
local s = redis.call('HMGET', KEYS[1], 'startedAt', 'status', 'endedAt', 'durationMs')
if not s[1] then return redis.error_reply('NOT_FOUND') end
if tonumber(ARGV[1]) < tonumber(s[1]) then return redis.error_reply('ENDED_BEFORE_START ' .. s[1]) end
if s[2] == 'closed' then
  if s[3] == ARGV[1] and s[4] == ARGV[2] then return redis.call('HGETALL', KEYS[1]) end
  return redis.error_reply('CONFLICT')
end
redis.call('HSET', KEYS[1], 'status', 'closed', 'endedAt', ARGV[1], 'durationMs', ARGV[2])
${APPLY_STATS}
if ARGV[3] then
  redis.call('HSET', KEYS[1], 'usage', ARGV[3])
  applyStats(2, ARGV[4], ARGV[5])
end
return redis.call('HGETALL', KEYS[1])
`;

/**
 * KEYS: a sorted-set index. ARGV: member, score (ms). Indexes the member at that score, or, when it has that
 * score already, one ms later: each write leaves a score of its own, so FORGET_INDEXED by whoever wrote (or
 * read) an earlier one never takes out a write made since, even in the same millisecond. Returns
 * { 1 when the member was not indexed, the score written }.
 */
export const INDEX_ANEW = `
local at = tonumber(ARGV[2])
local was = redis.call('ZSCORE', KEYS[1], ARGV[1])
if was and tonumber(was) >= at then at = tonumber(was) + 1 end
local added = redis.call('ZADD', KEYS[1], at, ARGV[1])
return { added, tostring(at) }
`;

/**
 * KEYS: a sorted-set index. ARGV: member, score. Removes the member only while it has that score: an entry
 * written again since (a move to canary indexing it anew) is not taken out by whoever read or wrote it before.
 */
export const FORGET_INDEXED = `
local at = redis.call('ZSCORE', KEYS[1], ARGV[1])
if at and tonumber(at) == tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
`;

/**
 * Lua: deletes the agent's canary judge figures (its seven keys, redis-keys.ts canaryCountKeys, passed from
 * KEYS[at]) when they are canary `id`'s (or no canary's: what is left of none), never a later canary's.
 */
export const FORGET_COUNTS = `
local function forgetCounts(at, id)
  local of = redis.call('HGET', KEYS[at], 'canary')
  if of and of ~= id then return end
  redis.call('DEL', unpack(KEYS, at, at + 6))
end
`;

/**
 * KEYS: deploy meta hash, deploys zset, new deploy hash. ARGV: agentId, deployId, now, version, subdomain
 * (claimed for this agent in the global hash before this runs; used if the agent has none yet), settings JSON,
 * external ('1' or ''), trafficPercent ('' = a full deploy), canaryWindowMs ('' = none).
 * The deploy number is taken atomically: numbers have no gaps under concurrent creates.
 */
export const CREATE_DEPLOY = `
local sub = redis.call('HGET', KEYS[1], 'subdomain')
if not sub then
  sub = ARGV[5]
  redis.call('HSET', KEYS[1], 'subdomain', sub)
end
local num = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[3], 'id', ARGV[2], 'agentId', ARGV[1], 'deployNumber', num, 'version', ARGV[4],
  'status', 'pending', 'subdomain', sub, 'createdAt', ARGV[3], 'updatedAt', ARGV[3], 'settings', ARGV[6])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[3], 'external', ARGV[7]) end
if ARGV[8] and ARGV[8] ~= '' then redis.call('HSET', KEYS[3], 'trafficPercent', ARGV[8]) end
if ARGV[9] and ARGV[9] ~= '' then redis.call('HSET', KEYS[3], 'canaryWindowMs', ARGV[9]) end
redis.call('ZADD', KEYS[2], num, ARGV[2])
return redis.call('HGETALL', KEYS[3])
`;

/**
 * KEYS: deploy meta hash, deploy hash, the seven keys of the agent's canary judge figures (redis-keys.ts
 * canaryCountKeys: made with a canary, deleted with its end). ARGV: target status, now, deployId, deploy key
 * prefix, gate override JSON ('' = none; recorded when the deploy goes live), failure JSON ('' = none; recorded
 * when it fails), outcome JSON ('' = none: the `rollback` of a canary rolled back, the `promoted` of one
 * promoted).
 * pending → building | failed; building → live | canary | failed; canary → live | rolled_back.
 * A new live supersedes the previous live one and any other canary; a new canary supersedes the previous
 * canary and needs a live deploy beside it (NO_LIVE otherwise). Meta `live` / `canary` name the agent's live
 * deploy and its canary. Asking for the status a deploy already has is a no-op (safe to retry), unless the move
 * carries its outcome (SETTLED: another move made it first).
 */
export const UPDATE_DEPLOY = `
${FORGET_COUNTS}
local from = redis.call('HGET', KEYS[2], 'status')
if not from then return redis.error_reply('NOT_FOUND') end
local to = ARGV[1]
if from == to then
  -- a move that carries its outcome (a rollback's verdict, a promotion) is made once: of two racing judges,
  -- the second lost, and would announce the move again
  if ARGV[7] ~= '' then return redis.error_reply('SETTLED ' .. to) end
  return redis.call('HGETALL', KEYS[2])
end
local allowed = {
  pending = { building = true, failed = true },
  building = { live = true, canary = true, failed = true },
  canary = { live = true, rolled_back = true },
}
if not (allowed[from] and allowed[from][to]) then
  return redis.error_reply('ILLEGAL_TRANSITION ' .. from .. ' ' .. to)
end
local function supersede(field)
  local prev = redis.call('HGET', KEYS[1], field)
  if prev and prev ~= ARGV[3] then
    local key = ARGV[4] .. prev
    local st = redis.call('HGET', key, 'status')
    if st == 'live' or st == 'canary' then
      redis.call('HSET', key, 'status', 'superseded', 'updatedAt', ARGV[2])
    end
    if st == 'canary' then forgetCounts(3, prev) end
  end
end
if to == 'canary' then
  local live = redis.call('HGET', KEYS[1], 'live')
  if not live or redis.call('HGET', ARGV[4] .. live, 'status') ~= 'live' then
    return redis.error_reply('NO_LIVE')
  end
end
redis.call('HSET', KEYS[2], 'status', to, 'updatedAt', ARGV[2])
if to == 'live' and ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'gateOverride', ARGV[5]) end
if to == 'failed' and ARGV[6] ~= '' then redis.call('HSET', KEYS[2], 'failure', ARGV[6]) end
if to == 'rolled_back' and ARGV[7] ~= '' then redis.call('HSET', KEYS[2], 'rollback', ARGV[7]) end
if to == 'live' and from == 'canary' and ARGV[7] ~= '' then redis.call('HSET', KEYS[2], 'promoted', ARGV[7]) end
if from == 'canary' then forgetCounts(3, ARGV[3]) end
if to == 'live' then
  if from ~= 'canary' then redis.call('HSET', KEYS[2], 'liveAt', ARGV[2]) end
  supersede('live')
  supersede('canary')
  redis.call('HDEL', KEYS[1], 'canary')
  redis.call('HSET', KEYS[1], 'live', ARGV[3])
end
if to == 'canary' then
  redis.call('HSET', KEYS[2], 'liveAt', ARGV[2])
  supersede('canary')
  redis.call('HSET', KEYS[1], 'canary', ARGV[3])
  -- its calls are counted from now (calls-store.ts): none of them started before; what an earlier canary
  -- left of its figures goes first
  redis.call('DEL', unpack(KEYS, 3, 9))
  redis.call('HSET', KEYS[3], 'since', ARGV[2], 'canary', ARGV[3],
    'live', redis.call('HGET', KEYS[1], 'live'), 'seeded', '1')
end
if to == 'rolled_back' and redis.call('HGET', KEYS[1], 'canary') == ARGV[3] then
  redis.call('HDEL', KEYS[1], 'canary')
end
return redis.call('HGETALL', KEYS[2])
`;

/**
 * KEYS: deploy meta hash, the seven keys of the agent's canary judge figures (redis-keys.ts canaryCountKeys).
 * ARGV: now, deploy key prefix, stopped JSON (`{ reason, at }`).
 * Takes the agent's live deploy (and its canary, if one runs) offline: `stopped`, with why; nothing is live
 * after it. Returns the live deploy's hash, or {} when none was live (asking again is safe).
 */
export const STOP_DEPLOY = `
${FORGET_COUNTS}
local canary = redis.call('HGET', KEYS[1], 'canary')
if canary then
  redis.call('HDEL', KEYS[1], 'canary')
  forgetCounts(2, canary)
  local ckey = ARGV[2] .. canary
  if redis.call('HGET', ckey, 'status') == 'canary' then
    redis.call('HSET', ckey, 'status', 'stopped', 'updatedAt', ARGV[1], 'stopped', ARGV[3])
  end
end
local live = redis.call('HGET', KEYS[1], 'live')
if not live then return {} end
redis.call('HDEL', KEYS[1], 'live')
local key = ARGV[2] .. live
if redis.call('HGET', key, 'status') ~= 'live' then return {} end
redis.call('HSET', key, 'status', 'stopped', 'updatedAt', ARGV[1], 'stopped', ARGV[3])
return redis.call('HGETALL', key)
`;

/** KEYS: session hash. ARGV: recording JSON. Sets it on a session that exists; returns the hash (empty: none). */
export const SET_RECORDING = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
redis.call('HSET', KEYS[1], 'recording', ARGV[1])
return redis.call('HGETALL', KEYS[1])
`;

/**
 * KEYS: deploy hash. ARGV: settings JSON (merged), now. Changes a deploy's call settings (calls started after
 * it use them); returns the hash (empty: no such deploy).
 */
export const SET_DEPLOY_SETTINGS = `
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
redis.call('HSET', KEYS[1], 'settings', ARGV[1], 'updatedAt', ARGV[2])
return redis.call('HGETALL', KEYS[1])
`;
