import { Cluster, type Redis } from 'ioredis';
import type { RedisClient } from './connection.js';

/**
 * Each master of a cluster (or the one server): what a scan over the whole keyspace must visit, since a
 * SCAN on a cluster sees one node only.
 */
export function masters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/** Every key matching `pattern`, in batches of about `count` (SCAN, never KEYS), over every master. */
export async function* scanKeys(client: RedisClient, pattern: string, count = 500): AsyncGenerator<string[]> {
  for (const node of masters(client)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (found.length > 0) yield found;
    } while (cursor !== '0');
  }
}
