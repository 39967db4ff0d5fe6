import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { sweepLeftTempDirs } from './temp-dirs.js';

const dist = join(import.meta.dirname, '..', 'dist', 'index.js');

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });

// A child process that starts its servers as tests and benchmarks do, then fails before disposing of them.
const failsHalfWay = `
  const { startLocalNats, startLocalRedis } = await import(${JSON.stringify(dist)});
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  console.log(JSON.stringify({ pid: process.pid, nats: nats.port, redis: redis.port }));
  throw new Error('set-up failed half-way');
`;

// One that is stopped by a signal while it runs (Ctrl-C on a benchmark).
const waitsForever = `
  const { startLocalNats, startLocalRedis } = await import(${JSON.stringify(dist)});
  const nats = await startLocalNats();
  const redis = await startLocalRedis();
  console.log(JSON.stringify({ nats: nats.port, redis: redis.port }));
  setInterval(() => undefined, 1000);
`;

/**
 * Each child's temporary directory of its own (TMPDIR), which no other test file's sweep looks into, and the
 * servers' directories a process left there.
 */
const ownTmp = () => mkdtempSync(join(tmpdir(), 'servers-test-'));
const leftBy = (pid: number | undefined, parent: string) =>
  readdirSync(parent).filter((name) => name.startsWith('vab-') && name.includes(`-${pid}-`));

/** A child that starts its servers with its temporary files in `tmp`, and the ports it printed. */
async function startsServers(tmp: string) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', waitsForever], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TMPDIR: tmp },
  });
  const line = await new Promise<string>((resolve) =>
    child.stdout.once('data', (d: Buffer) => resolve(d.toString())),
  );
  return { child, ports: JSON.parse(line) as { nats: number; redis: number } };
}

async function allRefused(ports: { nats: number; redis: number }): Promise<boolean> {
  const both = async () => (await refused(ports.nats)) && (await refused(ports.redis));
  await expect.poll(both, { timeout: 5_000, interval: 50 }).toBe(true);
  return both();
}

describe('local servers', () => {
  // the child processes import the built kit; a missing build fails here, naming the command, not silently skipped
  beforeAll(() => {
    if (!existsSync(dist))
      throw new Error('packages/testkit/dist is missing: run `npx turbo run build` first');
  });
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'are stopped, and their directories removed, when the process that started them gets %s',
    async (signal) => {
      const tmp = ownTmp();
      const { child, ports } = await startsServers(tmp);
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.once('exit', (_code, sig) => resolve(sig)),
      );
      child.kill(signal);
      expect(await exited).toBe(signal); // it still ends as the signal says
      expect(await allRefused(ports)).toBe(true);
      expect(leftBy(child.pid, tmp)).toEqual([]);
      rmSync(tmp, { recursive: true, force: true });
    },
  );

  it('are stopped when the process that started them is killed outright (SIGKILL: no exit handler runs), their directories swept by the next', async () => {
    const tmp = ownTmp();
    const { child, ports } = await startsServers(tmp);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(await allRefused(ports)).toBe(true);
    // its directories stay (no handler ran) until the next process of ours makes one, or sweeps
    expect(leftBy(child.pid, tmp)).toHaveLength(2);
    // (its servers, stopped by their parent's death, may still be finishing: swept again until gone)
    const swept = () => (sweepLeftTempDirs(tmp), leftBy(child.pid, tmp));
    await expect.poll(swept, { timeout: 5_000, interval: 100 }).toEqual([]);
    rmSync(tmp, { recursive: true, force: true });
  });

  it('are stopped, and their directories removed, when the process that started them fails before disposing of them', async () => {
    const run = promisify(execFile);
    const tmp = ownTmp();
    const failed = await run(process.execPath, ['--input-type=module', '-e', failsHalfWay], {
      env: { ...process.env, TMPDIR: tmp },
    }).catch((err: { code: number; stdout: string; stderr: string }) => err);
    expect(failed).toHaveProperty('code', 1);
    expect((failed as { stderr: string }).stderr).toContain('set-up failed half-way');
    const { pid, ...ports } = JSON.parse((failed as { stdout: string }).stdout) as {
      pid: number;
      nats: number;
      redis: number;
    };
    expect(await allRefused(ports)).toBe(true);
    expect(leftBy(pid, tmp)).toEqual([]);
    rmSync(tmp, { recursive: true, force: true });
  });
});
