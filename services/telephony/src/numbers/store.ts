import { AppError, PhoneNumber, type CreatePhoneNumberBody } from '@vab/contracts';
import { scriptError, storage, type RedisClient } from '@vab/storage';
import { randomUUID } from 'node:crypto';
import { keys } from './redis-keys.js';

/**
 * Claims a number for a record, atomically: a number held by the same agent answers with its record (a retry
 * of the same create), by another agent with CONFLICT.
 */
const CREATE = `
local held = redis.call('HGET', KEYS[2], ARGV[1])
if held then
  local record = redis.call('HGET', KEYS[1], held)
  if record and cjson.decode(record).agentId == ARGV[3] then return record end
  return redis.error_reply('CONFLICT this number is connected to another agent')
end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return ARGV[4]
`;

/** Rewrites one record's agent; the number stays. */
const UPDATE = `
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return redis.error_reply('NOT_FOUND no phone number with this id') end
local r = cjson.decode(record)
r.agentId = ARGV[2]
r.updatedAt = tonumber(ARGV[3])
local out = cjson.encode(r)
redis.call('HSET', KEYS[1], ARGV[1], out)
return out
`;

const DELETE = `
local record = redis.call('HGET', KEYS[1], ARGV[1])
if not record then return redis.error_reply('NOT_FOUND no phone number with this id') end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], cjson.decode(record).number)
return 1
`;

const REFUSALS = {
  CONFLICT: (detail: string) => new AppError('CONFLICT', detail),
  NOT_FOUND: (detail: string) => new AppError('NOT_FOUND', detail),
};

/** The phone numbers and the agent each is answered with, in the telephony service's own keys. */
export class NumberStore {
  constructor(private readonly redis: RedisClient) {}

  async create(body: CreatePhoneNumberBody): Promise<PhoneNumber> {
    const now = Date.now();
    const record: PhoneNumber = { id: randomUUID(), ...body, createdAt: now, updatedAt: now };
    const json = await this.script(CREATE, [body.number, record.id, body.agentId, JSON.stringify(record)]);
    return PhoneNumber.parse(JSON.parse(json));
  }

  async update(id: string, agentId: string): Promise<PhoneNumber> {
    const json = await this.script(UPDATE, [id, agentId, String(Date.now())]);
    return PhoneNumber.parse(JSON.parse(json));
  }

  async delete(id: string): Promise<void> {
    await this.script(DELETE, [id]);
  }

  async list(): Promise<PhoneNumber[]> {
    const all = await storage(() => this.redis.hvals(keys.byId));
    return all.map((j) => PhoneNumber.parse(JSON.parse(j))).sort((a, b) => a.createdAt - b.createdAt);
  }

  async get(id: string): Promise<PhoneNumber> {
    const json = await storage(() => this.redis.hget(keys.byId, id));
    if (!json) throw new AppError('NOT_FOUND', 'no phone number with this id');
    return PhoneNumber.parse(JSON.parse(json));
  }

  /** The record of the number a call was made to, if it is one of ours. */
  async byNumber(number: string): Promise<PhoneNumber | undefined> {
    const id = await storage(() => this.redis.hget(keys.byNumber, number));
    if (!id) return undefined;
    const json = await storage(() => this.redis.hget(keys.byId, id));
    return json ? PhoneNumber.parse(JSON.parse(json)) : undefined;
  }

  private async script(lua: string, args: string[]): Promise<string> {
    try {
      return String(await this.redis.eval(lua, 2, keys.byId, keys.byNumber, ...args));
    } catch (err) {
      throw scriptError(err, REFUSALS);
    }
  }
}
