import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

describe('createLogger', () => {
  it('redacts credentials wherever a careless call puts them', () => {
    const out: string[] = [];
    const log = createLogger(
      't',
      'info',
      new Writable({
        write(c: Buffer, _e, cb) {
          out.push(c.toString());
          cb();
        },
      }),
    );
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
