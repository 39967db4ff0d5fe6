/*
 * Lua scripts: each runs atomically over one agent's keys (one slot on a cluster), so an agent never exists
 * without its first snapshot, a snapshot never exists without its agent, and concurrent saves get distinct,
 * gapless version numbers. The list's view (index and summaries, global keys) is brought up to date by
 * VIEW right after, on its own slot.
 *
 * Version entries are ZSET members `<version>:<createdAt>:<contentHash>:<sizeBytes>` scored by version:
 * an unchanged autosave costs one such member (~100 bytes) and no second copy of the flow.
 */

/** KEYS: agent, versions, content. ARGV: id, name, now, hash, flowJson, size. */
export const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply('CONFLICT') end
redis.call('SET', KEYS[3], ARGV[5], 'NX')
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'createdAt', ARGV[3], 'updatedAt', ARGV[3],
  'version', 1, 'rev', 1, 'head', ARGV[4], 'archived', '0')
redis.call('ZADD', KEYS[2], 1, '1:' .. ARGV[3] .. ':' .. ARGV[4] .. ':' .. ARGV[6])
return 1
`;

/*
 * Shared head of the mutating scripts: loads the agent, refuses archived/unknown ones and a stale If-Match
 * (ARGV[3]: '' = none, '*' = any, else a comma-separated list of entity tags).
 */
const GUARD = `
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
 * KEYS: agent, versions, content (of the new flow, or any key of the agent when no flow).
 * ARGV: id, now, ifMatch, name ('' = keep), hash ('' = no new snapshot), flowJson, size.
 * Returns { name, createdAt, updatedAt, version, rev, head, snapshots stored, changed ('1'/'0') }.
 */
export const UPDATE = `${GUARD}
local head = a[4]
local name = a[6]
-- nothing to change ({} is a valid PATCH): the agent as it is, no new version, no updatedAt bump
if ARGV[4] == '' and ARGV[5] == '' then
  return { name, a[7], a[5], tostring(version), tostring(rev), head, '0', '0' }
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
return { name, a[7], tostring(now), tostring(version), tostring(rev), head,
  tostring(redis.call('ZCARD', KEYS[2])), '1' }
`;

/**
 * KEYS: agent, versions. ARGV: id, now, ifMatch, versionToRestore. Returns what UPDATE returns.
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
return { a[6], a[7], tostring(now), tostring(version), tostring(rev), hash,
  tostring(redis.call('ZCARD', KEYS[2])), '1' }
`;

/**
 * KEYS: agent. ARGV: id, now, ifMatch. Archives (hidden from the list, kept in storage).
 * Returns { archivedAt, rev }.
 */
export const ARCHIVE = `${GUARD}
redis.call('HSET', KEYS[1], 'archived', '1', 'archivedAt', ARGV[2], 'rev', rev + 1)
return { ARGV[2], tostring(rev + 1) }
`;

/**
 * KEYS: agent. ARGV: archivedAt. Undoes the archive that set it, when its second step (taking the agent's
 * live deploy offline) failed; an archived agent takes no other write, so nothing else is undone. Returns
 * { name, createdAt, updatedAt, rev }, or {} when the agent is not archived by that archive.
 */
export const UNARCHIVE = `
local a = redis.call('HMGET', KEYS[1], 'archived', 'archivedAt', 'rev', 'name', 'createdAt', 'updatedAt')
if a[1] ~= '1' or a[2] ~= ARGV[1] then return {} end
local rev = tonumber(a[3]) + 1
redis.call('HSET', KEYS[1], 'archived', '0', 'rev', rev)
redis.call('HDEL', KEYS[1], 'archivedAt')
return { a[4], a[5], a[6], tostring(rev) }
`;

/**
 * The list's view, on its own slot (`ag:{views}:…`): KEYS: index, summaries, revs.
 * ARGV: id, rev, updatedAt, summaryJson ('' = not listed: archived), force ('1': apply an equal rev too).
 * The agent's own script has already run; this brings the view to that state unless a later state of the
 * same agent got there first (its rev is higher), so concurrent writes can land here in any order.
 */
export const VIEW = `
local cur = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
local rev = tonumber(ARGV[2])
if rev < cur or (rev == cur and ARGV[5] ~= '1') then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if ARGV[4] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
end
return 1
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

/**
 * Retention, one bounded batch: KEYS: agent, versions. ARGV: content key prefix, keep (newest snapshots
 * kept), batch (most removed per call), pinned versions ('3,7,…': kept whatever their age).
 * Removes the oldest snapshots beyond the newest `keep`, and the content of each that no remaining snapshot
 * (nor the head) shares. Returns how many were removed: the caller repeats while a batch was full.
 */
export const PRUNE = `
local keep = tonumber(ARGV[2])
local total = redis.call('ZCARD', KEYS[2])
if total <= keep then return 0 end
local pinned = {}
for v in string.gmatch(ARGV[4], '[^,]+') do pinned[v] = true end
local removed = 0
local gone = {}
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, total - keep - 1)) do
  if removed >= tonumber(ARGV[3]) then break end
  local v, hash = string.match(m, '^(%d+):%d+:([^:]+):')
  if not pinned[v] then
    redis.call('ZREM', KEYS[2], m)
    removed = removed + 1
    gone[hash] = true
  end
end
if removed > 0 then
  gone[redis.call('HGET', KEYS[1], 'head') or ''] = nil
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    gone[string.match(m, '^%d+:%d+:([^:]+):')] = nil
  end
  for hash, _ in pairs(gone) do redis.call('UNLINK', ARGV[1] .. hash) end
end
return removed
`;
