import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, envInt, envParsed, loadConfig } from './config.js';

describe('loadConfig', () => {
  const shape = { PORT: envInt(3000, 1), URL: z.string().min(1) };

  it('applies the base and the service defaults, coerces, and freezes', () => {
    const config = loadConfig(shape, { URL: 'x', PORT: '8080' });
    expect(config).toEqual({
      URL: 'x',
      PORT: 8080,
      NATS_URL: 'nats://127.0.0.1:4222',
      LOG_LEVEL: 'info',
      SHUTDOWN_TIMEOUT_MS: 10_000,
      // tracing off: no OTLP endpoint
      OTEL_SDK_DISABLED: false,
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      OTEL_EXPORTER_OTLP_HEADERS: {},
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: {},
      OTEL_RESOURCE_ATTRIBUTES: {},
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: false,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(() => {
      (config as { PORT: number }).PORT = 1;
    }).toThrow();
  });

  it('names every bad variable, the base ones too', () => {
    expect(() => loadConfig(shape, { PORT: 'abc', LOG_LEVEL: 'loud' })).toThrow(
      /PORT[\s\S]*URL|LOG_LEVEL[\s\S]*PORT|PORT[\s\S]*LOG_LEVEL/,
    );
    const err = (() => {
      try {
        loadConfig(shape, { PORT: 'abc', LOG_LEVEL: 'loud' });
      } catch (e) {
        return String(e);
      }
    })();
    for (const name of ['PORT', 'URL', 'LOG_LEVEL']) expect(err).toContain(name);
  });

  it('says each problem on one line, the variable first', () => {
    const shape = { UPSTREAM_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }) };
    expect(() => loadConfig(shape, { UPSTREAM_URL: 'ftp://x', LOG_LEVEL: 'loud' })).toThrow(ConfigError);
    try {
      loadConfig(shape, { UPSTREAM_URL: 'ftp://x', LOG_LEVEL: 'loud' });
    } catch (e) {
      const message = (e as Error).message;
      expect(message).not.toContain('\n');
      expect(message).toMatch(/^invalid configuration: /);
      expect(message).toContain('UPSTREAM_URL must be an http(s) URL');
      expect(message).toMatch(/LOG_LEVEL: /);
    }
  });

  it("takes a parsed variable, and names it with its parser's message when it does not parse", () => {
    const shape = {
      PORTS: envParsed((text) =>
        (text ?? '').split(',').map((p) => {
          if (!/^\d+$/.test(p)) throw new Error(`not a port: entry ${p.length} characters long`);
          return Number(p);
        }),
      ),
    };
    expect(loadConfig(shape, { PORTS: '80,443' }).PORTS).toEqual([80, 443]);
    expect(() => loadConfig(shape, { PORTS: '80,secret' })).toThrow(
      /PORTS.*not a port: entry 6 characters long/,
    );
  });
});
