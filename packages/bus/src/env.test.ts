import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { envBool, envInt, parseEnv } from './env.js';

describe('parseEnv', () => {
  const Schema = z.object({ PORT: envInt(3000, 1), DEBUG: envBool(false), URL: z.string().min(1) });

  it('applies defaults and coerces', () => {
    expect(parseEnv(Schema, { URL: 'x', PORT: '8080', DEBUG: 'yes' })).toEqual({
      URL: 'x',
      PORT: 8080,
      DEBUG: true,
    });
    expect(parseEnv(Schema, { URL: 'x' })).toEqual({ URL: 'x', PORT: 3000, DEBUG: false });
  });

  it('names every bad variable', () => {
    expect(() => parseEnv(Schema, { PORT: 'abc', DEBUG: 'maybe' })).toThrow(
      /PORT[\s\S]*DEBUG[\s\S]*URL|PORT[\s\S]*URL/,
    );
  });
});
