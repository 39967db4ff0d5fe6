import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * A module of @livekit/agents 1.9.0 that its package does not export, read from the package's own files (the
 * version is pinned exactly, so the path and what it exports are known).
 */
export async function agentsModule<T>(...path: string[]): Promise<T> {
  const entry = createRequire(import.meta.url).resolve('@livekit/agents');
  return (await import(pathToFileURL(join(dirname(entry), ...path)).href)) as T;
}
