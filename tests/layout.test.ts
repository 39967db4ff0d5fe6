import { ESLint, type Linter } from 'eslint';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import tseslint from 'typescript-eslint';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The direction of imports (docs/architecture.md) is held by ESLint: eslint.config.js makes one
 * `no-restricted-imports` config per folder of each service's layers and one
 * `@typescript-eslint/no-restricted-imports` config per workspace package. These tests lint an import of every
 * part from every other part with those configs (as `npx eslint` applies them, without the type-aware rules,
 * which take a minute to load and have nothing to say about imports) and expect exactly the upward ones, and
 * those within a layer, to fail.
 */

type Layers = Record<string, string[][]>;
interface ConfigModule {
  default: Linter.Config[];
  layers: Layers;
  packageLayers: string[][];
  directionRules: Linter.Config[];
}

const ROOT = join(import.meta.dirname, '..');
let config: ConfigModule;
let eslint: ESLint;

beforeAll(async () => {
  // a path the compiler does not follow: eslint.config.js is JavaScript with no declarations
  const file = new URL('../eslint.config.js', import.meta.url).href;
  config = (await import(file)) as ConfigModule;
  eslint = new ESLint({
    cwd: ROOT,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser as Linter.Parser },
        plugins: { '@typescript-eslint': tseslint.plugin as unknown as ESLint.Plugin },
      },
      ...config.directionRules,
    ],
  });
});

const RESTRICTING = new Set(['no-restricted-imports', '@typescript-eslint/no-restricted-imports']);

/** Whether importing `specifier` from the file at `filePath` (from the repository root) breaks the direction. */
async function refused(filePath: string, specifier: string): Promise<boolean> {
  const code = `import { x } from '${specifier}';\nexport const y = x;\n`;
  const [result] = await eslint.lintText(code, { filePath: join(ROOT, filePath) });
  const fatal = result!.messages.find((m) => m.fatal);
  if (fatal) throw new Error(`${filePath}: ${fatal.message}`);
  return result!.messages.some((m) => m.ruleId !== null && RESTRICTING.has(m.ruleId));
}

const tsFiles = (dir: string) =>
  readdirSync(join(ROOT, dir))
    .filter((f) => f.endsWith('.ts') && statSync(join(ROOT, dir, f)).isFile())
    .sort();

/** A file of the entry (a folder, a root file, or `*.ts`: a root file no layer names). */
function fileOf(root: string, entry: string, named: string[]): string {
  if (entry === '*.ts') return `${root}/${tsFiles(root).find((f) => !named.includes(f))!}`;
  if (!entry.endsWith('/')) return `${root}/${entry}`;
  const [first] = tsFiles(`${root}/${entry}`);
  if (!first) throw new Error(`${root}/${entry} holds no file`);
  return `${root}/${entry}${first}`;
}

describe('the direction of imports in each service', () => {
  it('is the one eslint.config.js applies: `npx eslint` runs these configs', () => {
    for (const rule of config.directionRules) expect(config.default).toContain(rule);
  });

  it('refuses every import upward or within a layer, and only those', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const [root, layers] of Object.entries(config.layers)) {
      const named = layers.flat().filter((e) => e.endsWith('.ts') && e !== '*.ts');
      const unnamed = tsFiles(root).find((f) => !named.includes(f));
      const layerOf = (e: string) => layers.findIndex((l) => l.includes(e));
      for (const entry of layers.flat()) {
        const from = fileOf(root, entry, named);
        const up = entry.endsWith('/') ? '../' : './';
        for (const target of layers.flat()) {
          if (target === entry) continue;
          const specifier =
            up +
            (target.endsWith('/')
              ? `${target}x.js`
              : (target === '*.ts' ? unnamed! : target).replace(/\.ts$/, '.js'));
          const rootFiles = !entry.endsWith('/') && !target.endsWith('/');
          const expected =
            layerOf(target) >= layerOf(entry) && !(rootFiles && layerOf(target) === layerOf(entry));
          checked++;
          if ((await refused(from, specifier)) !== expected) {
            wrong.push(`${from} → ${specifier}: ${expected ? 'allowed, should be refused' : 'refused'}`);
          }
        }
      }
    }
    expect(wrong).toEqual([]);
    expect(checked).toBeGreaterThan(100);
  });

  it('holds in a folder below a layer folder too', async () => {
    const from = 'services/playground/src/transports/room/room-audio.ts';
    expect(await refused(from, '../../testing/voice-caller.js')).toBe(true);
    expect(await refused(from, '../../service.js')).toBe(true);
    expect(await refused(from, '../../voice/pcm.js')).toBe(false);
    expect(await refused(from, '../text.js')).toBe(false);
    expect(await refused(from, './media-server.js')).toBe(false);
  });
});

describe('the direction of imports between the workspace packages', () => {
  it('lets a package import only the packages below its layer, and testkit only in its tests', async () => {
    const { packageLayers } = config;
    const dirs = Object.fromEntries(
      ['packages', 'services'].flatMap((top) =>
        readdirSync(join(ROOT, top)).map((name) => [name, `${top}/${name}`] as const),
      ),
    );
    const wrong: string[] = [];
    for (const [i, layer] of packageLayers.entries()) {
      for (const name of layer) {
        const below = packageLayers.slice(0, i).flat();
        for (const other of Object.keys(dirs)) {
          if (other === name) continue;
          const source = `${dirs[name]}/src/index.ts`;
          const test = `${dirs[name]}/src/layout-probe.test.ts`;
          const expected = !below.includes(other);
          if ((await refused(source, `@vab/${other}`)) !== expected) wrong.push(`${name} → ${other}`);
          if (other === 'testkit' && (await refused(test, '@vab/testkit')))
            wrong.push(`${name}'s tests → testkit`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });
});

describe('docs/architecture.md', () => {
  it('writes down the layers eslint.config.js holds', () => {
    const doc = readFileSync(join(ROOT, 'docs/architecture.md'), 'utf8');
    const section = doc.slice(doc.indexOf('## The direction of imports'));
    const written: Layers = {};
    for (const line of section.split('\n')) {
      const m = /^- `(services\/[a-z-]+\/src)`: (.*)$/.exec(line);
      if (!m) continue;
      written[m[1]!] = m[2]!.split('→').map((layer) => [...layer.matchAll(/`([^`]+)`/g)].map((t) => t[1]!));
    }
    expect(written).toEqual(config.layers);
  });
});
