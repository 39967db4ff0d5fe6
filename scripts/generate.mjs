#!/usr/bin/env node
// Writes what is made from the code, so it is read without running anything: the API document
// (docs/openapi.json, linted by `npm run lint`) and the typed client's types (packages/client/src/schema.ts).
// `npm run generate` builds first; a test fails when either file is stale.
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generated } from './generated.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
for (const [path, text] of Object.entries(await generated())) {
  await writeFile(join(root, path), text);
  console.log(`wrote ${path}`);
}
