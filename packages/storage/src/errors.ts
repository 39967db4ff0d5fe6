import { AppError } from '@vab/contracts';
import { ReplyError } from 'ioredis';

/**
 * Redis's own replies that mean "not now" rather than "no", by their prefix: a server loading its data, a
 * cluster between a master's failure and its replica's promotion (CLUSTERDOWN, TRYAGAIN, MASTERDOWN).
 */
const TRANSIENT_REPLIES = new Set(['LOADING', 'CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN']);

/** An error Redis replied with (ioredis types its `ReplyError` as any). */
const isReply = (err: unknown): boolean => err instanceof ReplyError;

/** ioredis's error classes for a command it gave up on: retries spent, or no cluster node answering. */
const CLIENT_GAVE_UP = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);

/** Socket failures, by their system error code. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN']);

/**
 * The failures ioredis reports as a plain `Error`, with no class or code of their own (ioredis 5): the
 * connection closed under a command, a cluster with no reachable seed, a command bounced between nodes
 * during a failover. Matched on the start of the message, and only on a plain `Error`.
 */
const IOREDIS_PLAIN = [
  'Connection is closed',
  'None of startup nodes is available',
  'Too many Cluster redirections',
];

/** Whether `err` says Redis cannot be reached now (as opposed to refusing the command). */
export function isUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (isReply(err)) return TRANSIENT_REPLIES.has(err.message.split(' ', 1)[0]!);
  if (CLIENT_GAVE_UP.has(err.name)) return true;
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && SOCKET_CODES.has(code)) return true;
  return err.constructor === Error && IOREDIS_PLAIN.some((m) => err.message.startsWith(m));
}

/**
 * Redis failures of connectivity become SERVICE_UNAVAILABLE, with the original as `cause`; anything else is
 * left to the bus (INTERNAL).
 */
function translateRedisError(err: unknown): unknown {
  if (err instanceof AppError || !isUnavailable(err)) return err;
  return new AppError('SERVICE_UNAVAILABLE', 'storage is unavailable, retry shortly', { cause: err });
}

/** Runs a storage operation and rethrows connectivity failures as SERVICE_UNAVAILABLE. */
export async function storage<T>(op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    throw translateRedisError(err);
  }
}

/**
 * Lua scripts that signal an expected failure do `return redis.error_reply('CODE detail')`; this maps the
 * first word to an AppError, so a script's business refusals cross the bus with their own code.
 */
export function scriptError(err: unknown, messages: Record<string, (detail: string) => AppError>): unknown {
  if (err instanceof Error && isReply(err)) {
    // Redis prefixes `ERR ` to an error_reply whose text has no space of its own.
    const [word, ...rest] = err.message.replace(/^ERR /, '').split(' ');
    const make = word ? messages[word] : undefined;
    if (make) return make(rest.join(' '));
  }
  return translateRedisError(err);
}
