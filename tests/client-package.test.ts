import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The typed client as a front-end repository gets it: packed, installed from the tarball, compiled.
const root = join(import.meta.dirname, '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
let scratch: string;

const EXAMPLE = `
import { ApiError, createApiClient, etagOf, ok } from '@vab/client';

const api = createApiClient({ baseUrl: 'http://127.0.0.1:3000', token: 'one-of-API_TOKENS' });

export async function autosave(id: string, etag: string | undefined): Promise<string | undefined> {
  const saved = await api.PATCH('/api/agents/{id}', {
    params: { path: { id }, header: { 'if-match': etag } },
    body: { name: 'Front desk', flow: { nodes: [{ id: 'start-1', nodeType: 'start' }], edges: [] } },
  });
  if (saved.error?.code === 'PRECONDITION_FAILED') return undefined;
  return etagOf(saved.response);
}

export async function names(): Promise<string[]> {
  try {
    return (await ok(api.GET('/api/agents'))).map((a) => a.name);
  } catch (err) {
    // code is undefined when something else (a proxy) answered
    if (err instanceof ApiError && err.code === undefined) return [];
    throw err;
  }
}
`;

const TYPO = `
import { createApiClient } from '@vab/client';

const api = createApiClient({ baseUrl: 'http://127.0.0.1:3000' });
export const renamed = api.PATCH('/api/agents/{id}', {
  params: { path: { id: 'a' } },
  body: { name: 'x', nmae: 'y' },
});
`;

const TSCONFIG = {
  compilerOptions: {
    strict: true,
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    lib: ['ES2022', 'DOM'],
    types: [],
    noEmit: true,
    skipLibCheck: false,
  },
};

/** One tsc run over the files (the client's types are big: compiled once), its output and exit code. */
function compile(files: Record<string, string>) {
  for (const [file, source] of Object.entries(files)) writeFileSync(join(scratch, file), source);
  writeFileSync(join(scratch, 'tsconfig.json'), JSON.stringify({ ...TSCONFIG, files: Object.keys(files) }));
  return spawnSync(process.execPath, [tsc, '-p', scratch], { cwd: scratch, encoding: 'utf8' });
}

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'vab-client-'));
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', scratch], {
      cwd: join(root, 'packages', 'client'),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  ) as { filename: string; files: { path: string }[] }[];
  const tarball = packed[0]!;
  expect(tarball.files.map((f) => f.path).sort()).toEqual(
    expect.arrayContaining([
      'README.md',
      'dist/index.d.ts',
      'dist/index.js',
      'dist/schema.d.ts',
      'package.json',
    ]),
  );
  expect(tarball.files.some((f) => f.path.startsWith('src/'))).toBe(false);
  writeFileSync(
    join(scratch, 'package.json'),
    JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
  );
  execFileSync(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      join(scratch, tarball.filename.replace(/^.*\//, '')),
    ],
    { cwd: scratch, stdio: ['ignore', 'pipe', 'pipe'] },
  );
}, 180_000);
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the client package, installed from its tarball into a project of its own', () => {
  it('has its built files and loads as an ES module', () => {
    expect(readdirSync(join(scratch, 'node_modules', '@vab', 'client', 'dist'))).toContain('index.js');
    const loaded = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const c = await import('@vab/client'); console.log(typeof c.createApiClient)",
      ],
      { cwd: scratch, encoding: 'utf8' },
    );
    expect(loaded.stdout.trim()).toBe('function');
  });

  it('compiles an example with tsc, and refuses a misspelt body field at compile time', () => {
    const run = compile({ 'example.ts': EXAMPLE, 'typo.ts': TYPO });
    const errors = run.stdout.split('\n').filter((l) => /error TS/.test(l));
    expect(run.status).not.toBe(0);
    // the example compiles (no error in it, none in the package's own types); the typo is refused
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^typo\.ts\(\d+,\d+\): error TS2353: .*'nmae' does not exist/);
  }, 180_000);
});
