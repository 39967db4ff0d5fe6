import { lineSink } from '@vab/testkit';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { lazyChild } from '@vab/bus';
import { createAccessLog, createLogger } from './logger.js';

function capture(): { out: string[]; stream: Writable } {
  const out: string[] = [];
  return { out, stream: lineSink(out) };
}

describe('lazyChild', () => {
  it('makes the child only when something is logged, with its bindings and the redaction', () => {
    const { out, stream } = capture();
    const log = createLogger('t', 'info', stream);
    let made = 0;
    const child = log.child.bind(log);
    log.child = ((...a: Parameters<typeof child>) => {
      made++;
      return child(...a);
    }) as typeof log.child;
    const quiet = lazyChild(log, { requestId: 'r1' });
    expect(typeof quiet.info).toBe('function');
    expect(quiet.level).toBe('info');
    expect(made).toBe(0);

    const loud = lazyChild(log, { requestId: 'r2' });
    loud.info({ apiKeys: { openai: 'sk-live' } }, 'first');
    loud.warn('second');
    expect(made).toBe(1);
    const lines = out.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.map((l) => [l.requestId, l.msg])).toEqual([
      ['r2', 'first'],
      ['r2', 'second'],
    ]);
    expect(out.join('')).not.toContain('sk-live');
  });
});

describe('createAccessLog', () => {
  /** A url with a quote and a backslash: the line is written by hand, not by pino, and must escape them. */
  const request = { requestId: 'r-1', method: 'GET', url: '/api/agents/"odd"\\path', status: 404, ms: 3 };

  it('writes one JSON line per request, shaped like the pino lines around it', () => {
    const { out, stream } = capture();
    createAccessLog('gateway', 'info', stream).request(request);
    const line = JSON.parse(out[0]!) as Record<string, unknown>;
    expect(line).toEqual({
      level: 30,
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      name: 'gateway',
      service: 'gateway',
      ...request,
      msg: 'request completed',
    });
    const { out: pinoOut, stream: pinoStream } = capture();
    createLogger('gateway', 'info', pinoStream).info('x');
    expect(Object.keys(line).slice(0, 4)).toEqual(Object.keys(JSON.parse(pinoOut[0]!)).slice(0, 4));
  });

  it('writes nothing above the info level', () => {
    const { out, stream } = capture();
    createAccessLog('gateway', 'warn', stream).request(request);
    expect(out).toEqual([]);
  });
});

describe('createLogger', () => {
  it('redacts credentials wherever a careless call puts them', () => {
    const { out, stream } = capture();
    const log = createLogger('t', 'info', stream);
    log.info(
      {
        body: {
          livekit: { url: 'wss://x', apiKey: 'APIkey123', apiSecret: 'shh-secret' },
          apiKeys: { openai: 'sk-live' },
        },
      },
      'm',
    );
    log.info({ apiKeys: { deepgram: 'dg-secret' }, headers: { authorization: 'Bearer tok' } }, 'm');
    const text = out.join('');
    for (const secret of ['APIkey123', 'shh-secret', 'sk-live', 'dg-secret', 'Bearer tok'])
      expect(text).not.toContain(secret);
    expect(text).toContain('wss://x');
  });
});
