#!/usr/bin/env node
// Writes what is made from the code, so it is read without running anything: the API document
// (docs/openapi.json, linted by `npm run lint`), the typed client's types (packages/client/src/schema.ts), the
// flow reference and the console's list of event types (services/gateway/console/lib/event-types.js).
// `npm run generate` builds first; a test fails when any of them is stale.
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generated } from './generated.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
for (const [path, text] of Object.entries(await generated())) {
  await writeFile(join(root, path), text);
  console.log(`wrote ${path}`);
}
