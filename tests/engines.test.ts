import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..');

/**
 * The Node versions the README promises ("Node 20.19+ (22.13+ and 24 work too)"), each at the lowest release
 * of its line: what `npm ci` checks every installed package's `engines.node` against (EBADENGINE). Reading the
 * lock file is what `npm ci` reads, without the minutes a fresh install takes; a package built for another
 * platform (its `os`/`cpu`) is not installed here, so npm does not check it here either.
 */
function promisedVersions(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const m = /Node (\d+\.\d+)\+ \((\d+\.\d+)\+ and (\d+) work too/.exec(readme);
  expect(m, 'the README names the Node versions').not.toBeNull();
  const [, first, second, third] = m!;
  return [`${first}.0`, `${second}.0`, `${third}.0.0`];
}

/** npm's own reading of `os`/`cpu`: a list of names, each maybe negated with `!`. */
const fits = (list: string[] | undefined, value: string) =>
  !list || (!list.includes(`!${value}`) && (list.includes(value) || list.every((x) => x.startsWith('!'))));

describe('the lock file on the Node versions the README names', () => {
  it('holds no package whose engines field refuses one of them (npm ci prints no EBADENGINE)', () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<
        string,
        { version?: string; engines?: { node?: string } | string[]; os?: string[]; cpu?: string[] }
      >;
    };
    const refused: string[] = [];
    for (const version of promisedVersions()) {
      for (const [path, pkg] of Object.entries(lock.packages)) {
        if (!fits(pkg.os, process.platform) || !fits(pkg.cpu, process.arch)) continue;
        const range = !Array.isArray(pkg.engines) ? pkg.engines?.node : undefined;
        if (range && !semver.satisfies(version, range, { includePrerelease: true })) {
          refused.push(`${path}@${pkg.version ?? ''} wants node ${range}, not ${version}`);
        }
      }
    }
    expect(refused).toEqual([]);
  });
});

describe('the image', () => {
  it('runs a Node the engines field takes (its npm ci would print EBADENGINE otherwise)', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    const versions = [...dockerfile.matchAll(/^FROM node:(\d+\.\d+\.\d+)/gm)].map((m) => m[1]!);
    expect(versions.length).toBeGreaterThan(0);
    expect(versions.filter((v) => !semver.satisfies(v, pkg.engines.node))).toEqual([]);
  });
});

/** A lock entry's package name: the path after its last `node_modules/` (a scoped name keeps its scope). */
const nameOf = (path: string) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
/** An `allowScripts` key's package name: `name`, or `name@range` (a scoped name starts with its own `@`). */
const keyName = (key: string) => (key.lastIndexOf('@') > 0 ? key.slice(0, key.lastIndexOf('@')) : key);

describe('install scripts (npm 11: allowScripts)', () => {
  const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { hasInstallScript?: boolean; os?: string[]; cpu?: string[] }>;
  };
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    allowScripts?: Record<string, boolean>;
  };
  const decided = new Set(Object.keys(pkg.allowScripts ?? {}).map(keyName));
  const withScripts = Object.entries(lock.packages)
    .filter(
      ([path, p]) => path && p.hasInstallScript && fits(p.os, process.platform) && fits(p.cpu, process.arch),
    )
    .map(([path]) => nameOf(path));

  it('decides every installed package that has one (npm ci prints no "not yet covered by allowScripts")', () => {
    expect(withScripts.filter((name) => !decided.has(name))).toEqual([]);
  });

  it('names no package that no longer has one (what `npm install-scripts prune` would remove)', () => {
    const all = new Set(
      Object.entries(lock.packages)
        .filter(([, p]) => p.hasInstallScript)
        .map(([path]) => nameOf(path)),
    );
    expect([...decided].filter((name) => !all.has(name))).toEqual([]);
  });
});
