import { z } from 'zod';
import { CallStarted } from './calls.js';
import { VoiceAudioFormat } from './voice.js';

/**
 * The public surface of a live deploy (issue 45): `/live/:subdomain` (the talk page), `/live/widget.js`, and
 * `POST /live/:subdomain/calls`. No builder token: a publishable key from other origins, rate limits per
 * address and per key, the deploy's caps.
 */

export const LiveParams = z.object({
  subdomain: z
    .string()
    .min(1)
    .max(100)
    .regex(/^[a-z0-9-]+$/),
});
export type LiveParams = z.infer<typeof LiveParams>;

export const LiveCallParams = LiveParams.extend({
  callId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
});
export type LiveCallParams = z.infer<typeof LiveCallParams>;

/** `POST /live/:subdomain/calls` body (optional): the audio format the caller's client sends and plays. */
export const StartLiveCallBody = z
  .object({ audio: VoiceAudioFormat.default({ sampleRate: 16000, frameMs: 20 }) })
  .strict();
export type StartLiveCallBody = z.infer<typeof StartLiveCallBody>;

/**
 * `201` answer: open the voice WebSocket at `audioPath` (it carries a short-lived single-use `?ticket=`) within
 * `connectWithinMs`; the protocol is the voice sessions' one.
 */
export const LiveCallStarted = z.object({
  callId: CallStarted.shape.callId,
  audioPath: z.string(),
  audio: CallStarted.shape.audio,
  connectWithinMs: z.number().int(),
});
export type LiveCallStarted = z.infer<typeof LiveCallStarted>;

/** The live routes' own prefix: a publishable key is accepted here and nowhere else. */
export const LIVE_PREFIX = '/live';
