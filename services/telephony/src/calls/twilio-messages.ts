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
/** 20 ms is 160 bytes; a few seconds at most in one message. */
const MEDIA_PAYLOAD_MAX = 64 * 1024;
const Media = z.object({
  event: z.literal('media'),
  media: z.object({
    payload: z.string().max(MEDIA_PAYLOAD_MAX),
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

/**
 * A `media` message's payload, checked as `TwilioInbound` checks it, without zod: a call's audio is 50 of them
 * a second, and zod's parse of the union was ~4 % of the relay's event loop in a profile of 10 calls
 * (docs/performance.md › Phone calls). undefined for anything else (another event, or a message zod might
 * refuse): that goes through `TwilioInbound`, which decides.
 */
export function mediaPayloadOf(message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null) return undefined;
  const { event, media } = message as { event?: unknown; media?: unknown };
  if (event !== 'media' || typeof media !== 'object' || media === null) return undefined;
  const { payload, timestamp, track } = media as { payload?: unknown; timestamp?: unknown; track?: unknown };
  if (typeof payload !== 'string' || payload.length > MEDIA_PAYLOAD_MAX) return undefined;
  if (timestamp !== undefined && typeof timestamp !== 'string' && typeof timestamp !== 'number')
    return undefined;
  if (track !== undefined && typeof track !== 'string') return undefined;
  return payload;
}
