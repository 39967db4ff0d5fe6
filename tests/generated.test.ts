import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain script of the repository's, without types
import { generated } from '../scripts/generated.mjs';

const root = join(import.meta.dirname, '..');

describe('what `npm run generate` writes', () => {
  it("is up to date with the code (the API document, the typed client, the flow reference, the console's event types)", async () => {
    const fresh = (await generated()) as Record<string, string>;
    for (const [path, text] of Object.entries(fresh)) {
      expect(readFileSync(join(root, path), 'utf8'), `${path} is stale: run npm run generate`).toBe(text);
    }
  });
});
