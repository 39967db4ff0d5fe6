import { z } from 'zod';

/**
 * Parses the environment once with a service's zod schema and fails fast, naming each bad variable.
 * Only `config.ts` files call this; nothing else reads `process.env`.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.output<S> {
  const result = schema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/** Environment values are strings; these coerce them with a readable error. */
export const envInt = (def: number, min = 0) => z.coerce.number().int().min(min).default(def);
export const envBool = (def: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(def ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
export const LogLevel = z
  .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
  .default('info');
