/*
 * Lua scripts: each runs atomically, so an agent never exists without its first snapshot, a snapshot never
 * exists without its agent, and concurrent saves get distinct, gapless version numbers.
 *
 * Version entries are ZSET members `<version>:<createdAt>:<contentHash>:<sizeBytes>` scored by version:
 * an unchanged autosave costs one such member (~100 bytes) and no second copy of the flow.
 */

/*
 * The list's row of an agent, as reply JSON, kept in the summaries hash next to the index by every script
 * that changes what the list shows: listing then reads one pre-built string per agent instead of a hash to
 * parse and re-serialize. Timestamps are integer milliseconds (13 digits print exactly with Lua's %.14g).
 */
const SUMMARY = `
local function summary(id, name, createdAt, updatedAt)
  return '{"id":' .. cjson.encode(id) .. ',"name":' .. cjson.encode(name) .. ',"createdAt":' ..
    createdAt .. ',"updatedAt":' .. updatedAt .. '}'
end
`;

/** KEYS: agent, versions, content, index, summaries. ARGV: id, name, now, hash, flowJson, size. */
export const CREATE = `${SUMMARY}
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('CONFLICT') end
redis.call('SET', KEYS[3], ARGV[5], 'NX')
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'createdAt', ARGV[3], 'updatedAt', ARGV[3],
  'version', 1, 'rev', 1, 'head', ARGV[4], 'archived', '0')
redis.call('ZADD', KEYS[2], 1, '1:' .. ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[6])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[5], ARGV[1], summary(ARGV[1], ARGV[2], ARGV[3], ARGV[3]))
return 1
`;

/*
 * Shared head of the mutating scripts: loads the agent, refuses archived/unknown ones and a stale If-Match
 * (ARGV[3]: '' = none, '*' = any, else a comma-separated list of entity tags).
 */
const GUARD = `${SUMMARY}
local a = redis.call('HMGET', KEYS[1], 'archived', 'version', 'rev', 'head', 'updatedAt', 'name', 'createdAt')
if (not a[1]) or a[1] == '1' then return redis.error_reply('NOT_FOUND') end
local version = tonumber(a[2])
local rev = tonumber(a[3])
local etag = '"' .. version .. '.' .. rev .. '"'
local ifMatch = ARGV[3]
if ifMatch ~= '' and ifMatch ~= '*' then
  local matched = false
  for tag in string.gmatch(ifMatch, '[^,]+') do
    if string.match(tag, '^%s*(.-)%s*$') == etag then matched = true end
  end
  if not matched then return redis.error_reply('PRECONDITION_FAILED ' .. etag) end
end
-- updatedAt never moves backwards, even if clocks of service instances disagree
local now = math.max(tonumber(ARGV[2]), tonumber(a[5]))
`;

/**
 * KEYS: agent, versions, content (of the new flow, or any key of the agent when no flow), index, summaries.
 * ARGV: id, now, ifMatch, name ('' = keep), hash ('' = no new snapshot), flowJson, size.
 * Returns { name, createdAt, updatedAt, version, rev, head }.
 */
export const UPDATE = `${GUARD}
local head = a[4]
local name = a[6]
-- nothing to change ({} is a valid PATCH): the agent as it is, no new version, no updatedAt bump
if ARGV[4] == '' and ARGV[5] == '' then
  return { name, a[7], a[5], tostring(version), tostring(rev), head }
end
if ARGV[5] ~= '' then
  version = version + 1
  redis.call('SET', KEYS[3], ARGV[6], 'NX')
  redis.call('ZADD', KEYS[2], version, version .. ':' .. now .. ':' .. ARGV[5] .. ':' .. ARGV[7])
  head = ARGV[5]
end
if ARGV[4] ~= '' then name = ARGV[4] end
rev = rev + 1
redis.call('HSET', KEYS[1], 'name', name, 'updatedAt', now, 'version', version, 'rev', rev, 'head', head)
redis.call('ZADD', KEYS[4], now, ARGV[1])
redis.call('HSET', KEYS[5], ARGV[1], summary(ARGV[1], name, a[7], tostring(now)))
return { name, a[7], tostring(now), tostring(version), tostring(rev), head }
`;

/**
 * KEYS: agent, versions, index, summaries. ARGV: id, now, ifMatch, versionToRestore.
 * Saves the old snapshot's content as a new latest version (the content is already stored).
 */
export const RESTORE = `${GUARD}
local found = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[4], ARGV[4])
if #found == 0 then return redis.error_reply('VERSION_NOT_FOUND') end
local _, _, hash, size = string.match(found[1], '^(%d+):(%d+):([^:]+):(%d+)$')
version = version + 1
rev = rev + 1
redis.call('ZADD', KEYS[2], version, version .. ':' .. now .. ':' .. hash .. ':' .. size)
redis.call('HSET', KEYS[1], 'updatedAt', now, 'version', version, 'rev', rev, 'head', hash)
redis.call('ZADD', KEYS[3], now, ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], summary(ARGV[1], a[6], a[7], tostring(now)))
return { a[6], a[7], tostring(now), tostring(version), tostring(rev), hash }
`;

/** KEYS: agent, index, summaries. ARGV: id, now, ifMatch. Archives: hidden from the list, kept in storage. */
export const ARCHIVE = `${GUARD}
redis.call('HSET', KEYS[1], 'archived', '1', 'archivedAt', ARGV[2], 'rev', rev + 1)
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return ARGV[2]
`;

/**
 * KEYS: agent. ARGV: the prefix of the agent's content keys (`ag:{<id>}:c:`). Returns
 * { name, createdAt, updatedAt, version, rev, flowJson }, or nil for an unknown or archived agent.
 * One round trip for the hottest read instead of HMGET then GET. The content key is built from the head
 * read here, so it cannot be declared in KEYS; it carries the agent's hash tag, so on a cluster it lives
 * in the same slot as KEYS[1].
 */
export const GET = `
local a = redis.call('HMGET', KEYS[1], 'name', 'createdAt', 'updatedAt', 'version', 'rev', 'head', 'archived')
if (not a[1]) or a[7] == '1' or (not a[6]) or a[6] == '' then return nil end
local flow = redis.call('GET', ARGV[1] .. a[6])
if not flow then return redis.error_reply('CONTENT_MISSING ' .. a[6]) end
return { a[1], a[2], a[3], a[4], a[5], flow }
`;
