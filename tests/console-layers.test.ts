import { ESLint } from 'eslint';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The console's imports go one way (services/gateway/console/main.js): an import against the direction
 * fails lint. Each case is linted as if it were that file of the console.
 */
const root = join(import.meta.dirname, '..');
const eslint = new ESLint({ cwd: root });

async function problemsOf(file: string, source: string) {
  const [result] = await eslint.lintText(source, { filePath: join(root, 'services/gateway/console', file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe("the console's one-way imports (ESLint)", () => {
  it.each([
    ['a panel imports the entry', 'panels/deploy.js', "import '../main.js';"],
    ['a panel imports another panel', 'panels/deploy.js', "import { x } from './talk.js';"],
    ['a view imports a panel', 'store/conversation.js', "import { x } from '../panels/build.js';"],
    ['a UI helper imports the store', 'ui/dom.js', "import { store } from '../store/store.js';"],
    ['the API imports a UI helper', 'lib/api.js', "import { $ } from '../ui/dom.js';"],
    ['the API imports the entry', 'lib/api.js', "import '../main.js';"],
  ])('%s: fails', async (_what, file, source) => {
    expect(await problemsOf(file, source)).toContainEqual(expect.stringMatching(/^no-restricted-imports: /));
  });

  it('the API module touches no DOM', async () => {
    expect(await problemsOf('lib/api.js', 'export const title = () => document.title;\n')).toEqual([
      expect.stringMatching(/^no-restricted-globals: .*lib\/ has no DOM/),
    ]);
  });

  it.each([
    ['a panel imports the store, the UI helpers and the API', 'panels/deploy.js'],
    ['the entry imports everything', 'main.js'],
  ])('%s: passes', async (_what, file) => {
    const source = [
      "import { json } from './lib/api.js';",
      "import { store } from './store/store.js';",
      "import { $ } from './ui/dom.js';",
      'export const x = [json, store, $];',
      '',
    ].join('\n');
    const relative = file.startsWith('panels/') ? source.replaceAll("'./", "'../") : source;
    expect(await problemsOf(file, relative)).toEqual([]);
  });
});
