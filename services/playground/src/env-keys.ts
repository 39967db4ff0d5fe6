import type { ProviderKeyStatus } from '@vab/contracts';
import { readFile } from 'node:fs/promises';
import { parseEnv as parseDotenv } from 'node:util';
import type { Logger } from 'pino';
import { PROVIDER_KEY_VARS, type ProviderKeyVar } from './config.js';

type KeyEnv = Partial<Record<ProviderKeyVar, string>>;

const set = (v: string | undefined) => v !== undefined && v.trim() !== '';

/**
 * Which providers are configured. LiveKit needs all three of its fields. Both spellings of the ElevenLabs
 * key count (the plugin reads ELEVEN_API_KEY; many .env files say ELEVENLABS_API_KEY). The minimum for the
 * builder is its language model (Anthropic) and speech recognition (Deepgram).
 */
export function keyStatus(env: KeyEnv): ProviderKeyStatus {
  const envKeys = {
    openai: set(env.OPENAI_API_KEY),
    anthropic: set(env.ANTHROPIC_API_KEY),
    elevenlabs: set(env.ELEVEN_API_KEY) || set(env.ELEVENLABS_API_KEY),
    deepgram: set(env.DEEPGRAM_API_KEY),
    livekit: set(env.LIVEKIT_URL) && set(env.LIVEKIT_API_KEY) && set(env.LIVEKIT_API_SECRET),
  };
  return { envKeys, setupRequired: !envKeys.anthropic || !envKeys.deepgram };
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
      log.warn({ file, code: (err as NodeJS.ErrnoException).code }, 'env file unreadable');
    return processEnv;
  }
  const fromFile = parseDotenv(text);
  const merged: KeyEnv = { ...processEnv };
  for (const name of PROVIDER_KEY_VARS) {
    const v = fromFile[name];
    if (v !== undefined) merged[name] = v;
  }
  return merged;
}
