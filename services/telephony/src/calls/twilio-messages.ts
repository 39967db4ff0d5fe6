import { z } from 'zod';

/**
 * Twilio Media Streams' messages, as Twilio sends them on a bidirectional stream (twilio.com/docs/voice/media-
 * streams/websocket-messages). Only what we use is checked; Twilio's other fields pass (its protocol grows).
 */
const Connected = z.object({ event: z.literal('connected') });
const Start = z.object({
  event: z.literal('start'),
  streamSid: z.string().max(64),
  start: z.object({
    streamSid: z.string().max(64).optional(),
    callSid: z.string().max(64),
    customParameters: z.record(z.string(), z.string()).default({}),
    mediaFormat: z.object({
      encoding: z.string(),
      sampleRate: z.number(),
      channels: z.number(),
    }),
  }),
});
const Media = z.object({
  event: z.literal('media'),
  media: z.object({
    // 20 ms is 160 bytes; a few seconds at most in one message
    payload: z.string().max(64 * 1024),
    timestamp: z.union([z.string(), z.number()]).optional(),
    track: z.string().optional(),
  }),
});
const Mark = z.object({ event: z.literal('mark'), mark: z.object({ name: z.string().max(128) }) });
const Dtmf = z.object({
  event: z.literal('dtmf'),
  dtmf: z.object({ digit: z.string().regex(/^[0-9*#A-D]$/) }),
});
const Stop = z.object({ event: z.literal('stop') });

export const TwilioInbound = z.discriminatedUnion('event', [Connected, Start, Media, Mark, Dtmf, Stop]);
export type TwilioInbound = z.infer<typeof TwilioInbound>;
export type TwilioStart = z.infer<typeof Start>;

/** μ-law at 8 kHz, one channel: the only format a Twilio stream carries. */
export const isTwilioFormat = (f: TwilioStart['start']['mediaFormat']) =>
  f.encoding === 'audio/x-mulaw' && f.sampleRate === 8000 && f.channels === 1;
