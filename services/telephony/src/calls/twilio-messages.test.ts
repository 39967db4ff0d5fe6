import { describe, expect, it } from 'vitest';
import { mediaPayloadOf, TwilioInbound } from './twilio-messages.js';

/** The payload zod's parse gives a media message (undefined: not one, or refused). */
const viaZod = (m: unknown) => {
  const parsed = TwilioInbound.safeParse(m);
  return parsed.success && parsed.data.event === 'media' ? parsed.data.media.payload : undefined;
};

describe('mediaPayloadOf', () => {
  const messages: unknown[] = [
    { event: 'media', streamSid: 'MZ1', media: { payload: 'f/8=', timestamp: '20', track: 'inbound' } },
    { event: 'media', media: { payload: 'f/8=', timestamp: 20, chunk: '1' }, sequenceNumber: '3' },
    { event: 'media', media: { payload: '' } },
    { event: 'media', media: { payload: 'x'.repeat(64 * 1024) } },
    { event: 'media', media: { payload: 'x'.repeat(64 * 1024 + 1) } },
    { event: 'media', media: { payload: 7 } },
    { event: 'media', media: { payload: 'f/8=', timestamp: null } },
    { event: 'media', media: { payload: 'f/8=', timestamp: true } },
    { event: 'media', media: { payload: 'f/8=', track: 3 } },
    { event: 'media', media: null },
    { event: 'media', media: ['f/8='] },
    { event: 'media', media: 'f/8=' },
    { event: 'media' },
    { event: 'mark', mark: { name: 'seg-1' } },
    { media: { payload: 'f/8=' } },
    ['media'],
    null,
    'media',
    7,
  ];

  it('takes exactly the media messages zod passes, with the same payload; zod decides the rest', () => {
    for (const m of messages) expect(mediaPayloadOf(m)).toBe(viaZod(m));
  });
});
