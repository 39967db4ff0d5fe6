import type { LivekitCredentials, ProviderKeyStatus } from '@vab/contracts';
import { readFile } from 'node:fs/promises';
import { parseEnv as parseDotenv } from 'node:util';
import type { Logger } from 'pino';
import type { KeyEnv } from './provider-keys.js';
import { PROVIDER_ENV_VARS, PROVIDERS } from './providers.js';

export const LIVEKIT_ENV_VARS = ['LIVEKIT_URL', 'LIVEKIT_API_KEY', 'LIVEKIT_API_SECRET'] as const;

/** Every variable GET /api/env-keys and the key rule read (never their values out). */
export const KEY_ENV_VARS: readonly string[] = [...PROVIDER_ENV_VARS, ...LIVEKIT_ENV_VARS];

const set = (v: string | undefined): v is string => v !== undefined && v.trim() !== '';
const hasKey = (env: KeyEnv, provider: string) =>
  (PROVIDERS[provider]?.envVars ?? []).some((name) => set(env[name]));

/**
 * Which providers are configured, as the spec's five entries. LiveKit needs all three of its fields. The
 * minimum for the builder is its language model (Anthropic) and speech recognition (Deepgram).
 */
export function keyStatus(env: KeyEnv): ProviderKeyStatus {
  const envKeys = {
    openai: hasKey(env, 'openai'),
    anthropic: hasKey(env, 'anthropic'),
    elevenlabs: hasKey(env, 'elevenlabs'),
    deepgram: hasKey(env, 'deepgram'),
    livekit: envLivekit(env) !== undefined,
  };
  return { envKeys, setupRequired: !envKeys.anthropic || !envKeys.deepgram };
}

/** The media server credentials of the server's environment, when all three are set. */
export function envLivekit(env: KeyEnv): LivekitCredentials | undefined {
  const [url, apiKey, apiSecret] = LIVEKIT_ENV_VARS.map((name) => env[name]?.trim());
  return url && apiKey && apiSecret ? { url, apiKey, apiSecret } : undefined;
}

/** The key variables of a process environment (what the playground keeps of it at start). */
export function keyVarsOf(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of KEY_ENV_VARS) {
    const v = env[name];
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/**
 * The env file merged over the process environment, read afresh so an edited file shows at once. A
 * missing file means "no overrides"; an unreadable one is logged (by path, never contents) and ignored.
 */
export async function currentKeyEnv(file: string, processEnv: KeyEnv, log: Logger): Promise<KeyEnv> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      log.warn(
        { code: 'ENV_FILE_UNREADABLE', file, errno: (err as NodeJS.ErrnoException).code },
        'env file unreadable',
      );
    return processEnv;
  }
  const fromFile = parseDotenv(text);
  const merged: Record<string, string | undefined> = { ...processEnv };
  for (const name of KEY_ENV_VARS) {
    const v = fromFile[name];
    if (v !== undefined) merged[name] = v;
  }
  return merged;
}
