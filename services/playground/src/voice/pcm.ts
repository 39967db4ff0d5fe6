import { AudioFrame, AudioResampler } from '@livekit/rtc-node';
import { concatPcm } from '@vab/contracts';

/** A sample this loud or louder is speech-level audio, not silence (about −40 dBFS). */
const AUDIBLE = 330;

export const isAudible = (pcm: Int16Array): boolean => {
  for (let i = 0; i < pcm.length; i++) {
    const v = pcm[i]!;
    if (v >= AUDIBLE || v <= -AUDIBLE) return true;
  }
  return false;
};

/** The mean power of a frame (the square of its RMS). */
export const powerOf = (pcm: Int16Array): number => {
  let sum = 0;
  for (let i = 0; i < pcm.length; i++) sum += pcm[i]! * pcm[i]!;
  return sum / pcm.length;
};

/**
 * Frames of one rate as one frame. LiveKit's own `mergeFrames` (which `recognize` and `collect` use on a list)
 * copies everything so far for each frame it adds: quadratic, and a third of a loaded playground's CPU in a
 * profile of 10 calls (docs/performance.md); this copies each sample once.
 */
export function oneFrame(frames: AudioFrame[]): AudioFrame {
  const first = frames[0]!;
  const data = concatPcm(frames.map((f) => f.data));
  return new AudioFrame(data, first.sampleRate, first.channels, data.length / first.channels);
}

/**
 * Mono frames of any rate at one rate (a playback sink's): a frame already at it passes as it is; a resampler
 * is made for the rate that comes, and made again when the rate changes.
 */
export class Resampled {
  private resampler: AudioResampler | undefined;

  constructor(readonly rate: number) {}

  push(frame: AudioFrame): AudioFrame[] {
    if (frame.sampleRate === this.rate) return [frame];
    if (this.resampler?.inputRate !== frame.sampleRate) {
      this.resampler?.close();
      this.resampler = new AudioResampler(frame.sampleRate, this.rate, 1);
    }
    return this.resampler.push(frame);
  }

  /** What the resampler still holds (nothing when none was needed). */
  flush(): AudioFrame[] {
    return this.resampler ? this.resampler.flush() : [];
  }

  close(): void {
    this.resampler?.close();
    this.resampler = undefined;
  }
}
