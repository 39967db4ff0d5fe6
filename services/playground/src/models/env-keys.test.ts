import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { currentKeyEnv, KEY_ENV_VARS, keyStatus } from './env-keys.js';

const log = pino({ level: 'silent' });

describe('keyStatus over every combination of set and unset variables', () => {
  // the variables behind the spec's five entries: 2^8 = 256 combinations
  const read = [
    'OPENAI_API_KEY',
    'ANTHROPIC_API_KEY',
    'ELEVEN_API_KEY',
    'ELEVENLABS_API_KEY',
    'DEEPGRAM_API_KEY',
    'LIVEKIT_URL',
    'LIVEKIT_API_KEY',
    'LIVEKIT_API_SECRET',
  ];
  // keys of providers the spec does not report are set in every combination: they change nothing
  const others = Object.fromEntries(KEY_ENV_VARS.filter((n) => !read.includes(n)).map((n) => [n, 'value']));
  const combos = Array.from({ length: 1 << read.length }, (_, mask) => ({
    ...others,
    ...Object.fromEntries(read.filter((_, i) => mask & (1 << i)).map((name) => [name, 'value'])),
  }));

  it('reads every key variable the provider table names', () => {
    expect(KEY_ENV_VARS).toEqual(expect.arrayContaining([...read, 'GROQ_API_KEY', 'GOOGLE_API_KEY']));
  });

  it.each(
    combos.map((env) => [
      Object.keys(env)
        .filter((k) => read.includes(k))
        .join(',') || '(none)',
      env,
    ]),
  )('%s', (_label, env) => {
    const has = (k: string) => k in env;
    const { envKeys, setupRequired } = keyStatus(env);
    expect(Object.keys(envKeys).sort()).toEqual(['anthropic', 'deepgram', 'elevenlabs', 'livekit', 'openai']);
    expect(envKeys.openai).toBe(has('OPENAI_API_KEY'));
    expect(envKeys.anthropic).toBe(has('ANTHROPIC_API_KEY'));
    expect(envKeys.elevenlabs).toBe(has('ELEVEN_API_KEY') || has('ELEVENLABS_API_KEY'));
    expect(envKeys.deepgram).toBe(has('DEEPGRAM_API_KEY'));
    expect(envKeys.livekit).toBe(has('LIVEKIT_URL') && has('LIVEKIT_API_KEY') && has('LIVEKIT_API_SECRET'));
    expect(setupRequired).toBe(!has('ANTHROPIC_API_KEY') || !has('DEEPGRAM_API_KEY'));
  });

  it('counts empty and blank values as unset', () => {
    expect(keyStatus({ ANTHROPIC_API_KEY: '', DEEPGRAM_API_KEY: '  ' })).toEqual({
      envKeys: { openai: false, anthropic: false, elevenlabs: false, deepgram: false, livekit: false },
      setupRequired: true,
    });
  });
});

describe('currentKeyEnv', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vab-envkeys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('merges the file over the process environment, read afresh each time', async () => {
    const file = join(dir, '.env');
    const proc = { OPENAI_API_KEY: 'from-process', DEEPGRAM_API_KEY: 'from-process' };
    expect(await currentKeyEnv(file, proc, log)).toEqual(proc); // no file yet
    writeFileSync(file, '# keys\nexport ANTHROPIC_API_KEY="sk-ant"\nDEEPGRAM_API_KEY=\nUNRELATED=1\n');
    expect(await currentKeyEnv(file, proc, log)).toEqual({
      OPENAI_API_KEY: 'from-process',
      ANTHROPIC_API_KEY: 'sk-ant',
      DEEPGRAM_API_KEY: '',
    });
    writeFileSync(file, 'DEEPGRAM_API_KEY=dg\n');
    expect(keyStatus(await currentKeyEnv(file, proc, log)).envKeys.deepgram).toBe(true);
  });

  it('treats an unreadable file as absent', async () => {
    const file = join(dir, 'locked.env');
    writeFileSync(file, 'ANTHROPIC_API_KEY=x\n');
    chmodSync(file, 0o000);
    const env = await currentKeyEnv(join(dir, 'locked-dir-missing', '.env'), {}, log);
    expect(env).toEqual({});
  });
});

describe('docs/operations.md', () => {
  it('lists exactly the key variables the provider table and LiveKit read', () => {
    const doc = readFileSync(join(import.meta.dirname, '../../../../docs/operations.md'), 'utf8');
    const start = doc.indexOf('- Provider keys');
    const entry = doc.slice(start, doc.indexOf('\n\n', start));
    const named = [...entry.matchAll(/`([A-Z0-9_]+_(?:KEY|SECRET|URL))`/g)].map((m) => m[1]);
    expect(new Set(named)).toEqual(new Set(KEY_ENV_VARS));
  });
});
