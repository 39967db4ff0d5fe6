import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A script this package runs in a process or thread of its own (`name`, e.g. `encoder-process.js`), beside the
 * module at `moduleUrl`: the built one beside it, or, when that module runs from its sources (the tests, after
 * `npm test` has built the packages), the built one under dist/.
 */
export function builtScript(moduleUrl: string, name: string): string {
  const here = fileURLToPath(moduleUrl);
  const built = here.endsWith('.ts') ? here.replace(`${sep}src${sep}`, `${sep}dist${sep}`) : here;
  return join(dirname(built), name);
}
