import { isAudible, powerOf } from '../voice/pcm.js';
import { FRAME_MS } from './voice-figures.js';

/** The simulated caller's line rate: what a phone-grade microphone gives the pipeline. */
export const CALLER_RATE = 16000;
/** One 20 ms frame of the caller's clock. */
export const FRAME_SAMPLES = (CALLER_RATE * FRAME_MS) / 1000;

/** RMS of a line's speech (its audible 20 ms frames only). */
export function speechRms(pcm: Int16Array): number {
  let sum = 0;
  let n = 0;
  for (let at = 0; at + FRAME_SAMPLES <= pcm.length; at += FRAME_SAMPLES) {
    const f = pcm.subarray(at, at + FRAME_SAMPLES);
    if (!isAudible(f)) continue;
    sum += powerOf(f);
    n++;
  }
  return n === 0 ? 0 : Math.sqrt(sum / n);
}

/**
 * Where to pause inside a line: the middle of the quiet stretch (a gap between words) nearest to the line's
 * middle; the middle itself when the line has none.
 */
export function pausePoint(pcm: Int16Array): number {
  const win = CALLER_RATE / 100;
  const quiet: boolean[] = [];
  for (let at = 0; at + win <= pcm.length; at += win) quiet.push(!isAudible(pcm.subarray(at, at + win)));
  const first = quiet.indexOf(false);
  const last = quiet.lastIndexOf(false);
  const mid = Math.floor(pcm.length / win / 2);
  let best: number | undefined;
  for (let i = first; i >= 0 && i < last; i++) {
    if (!quiet[i]) continue;
    let j = i;
    while (j < last && quiet[j]) j++;
    // a gap between words: 40 ms or more of quiet
    if (j - i >= 4) {
      const centre = Math.floor((i + j) / 2);
      if (best === undefined || Math.abs(centre - mid) < Math.abs(best - mid)) best = centre;
    }
    i = j;
  }
  return (best ?? mid) * win;
}
