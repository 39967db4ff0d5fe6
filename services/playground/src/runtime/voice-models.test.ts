import { asLanguageCode, initializeLogger, stt, VADEventType, type VADEvent } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { concat, speak } from '@vab/testkit';
import { describe, expect, it, vi } from 'vitest';
import { prewarmVoiceModels, SessionVad, sharedVad } from './voice-models.js';

initializeLogger({ pretty: false, level: 'error' });

const RATE = 16000;
const silence = (ms: number) => new Int16Array((RATE * ms) / 1000);

/** A batch STT (as OpenAI's HTTP one is): it hears whole utterances and says how long each was. */
class BatchStt extends stt.STT {
  label = 'batch';
  readonly heard: number[] = [];
  constructor(streaming = false) {
    super({ streaming, interimResults: false });
  }
  protected async _recognize(frames: AudioFrame | AudioFrame[]): Promise<stt.SpeechEvent> {
    const samples = [frames].flat().reduce((n, f) => n + f.samplesPerChannel, 0);
    this.heard.push((samples / RATE) * 1000);
    return {
      type: stt.SpeechEventType.FINAL_TRANSCRIPT,
      alternatives: [
        {
          text: `utterance ${this.heard.length}`,
          language: asLanguageCode('en'),
          startTime: 0,
          endTime: 0,
          confidence: 1,
        },
      ],
    };
  }
  stream(): stt.SpeechStream {
    throw new Error('batch only');
  }
}

describe("a session's VAD", () => {
  it(
    'gives a batch STT the utterances of its own stream, with one inference stream for both',
    { timeout: 20_000 },
    async () => {
      prewarmVoiceModels();
      const streams = vi.spyOn(sharedVad(), 'stream');
      const vad = new SessionVad();
      const batch = new BatchStt();
      const transcriber = vad.streaming(batch);
      expect(transcriber.capabilities.streaming).toBe(true);

      // as LiveKit's audio recognition does: the same frames to the VAD's stream and to the STT's
      const session = vad.stream();
      const transcription = transcriber.stream();
      const first = speak('I would like to book a table for two.');
      const second = speak('Tomorrow at seven, please.');
      const audio = concat(silence(300), first, silence(900), second, silence(900));
      const frame = RATE / 50;
      // in real time, as a caller speaks
      const started = performance.now();
      for (let i = 0; i + frame <= audio.length; i += frame) {
        const f = new AudioFrame(audio.slice(i, i + frame), RATE, 1, frame);
        session.pushFrame(f);
        transcription.pushFrame(f);
        const due = started + ((i + frame) / RATE) * 1000;
        await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
      }

      const segments: VADEvent[] = [];
      for await (const ev of session) {
        if (ev.type === VADEventType.END_OF_SPEECH) segments.push(ev);
        if (segments.length === 2) break;
      }
      const finals: string[] = [];
      for await (const ev of transcription) {
        if (ev.type === stt.SpeechEventType.FINAL_TRANSCRIPT) finals.push(ev.alternatives![0]!.text);
        if (finals.length === 2) break;
      }
      session.close();
      transcription.close();

      expect(finals).toEqual(['utterance 1', 'utterance 2']);
      // each utterance whole: its speech, the VAD's lead-in and its closing silence
      const speechMs = [first, second].map((s) => (s.length / RATE) * 1000);
      for (const [i, ms] of batch.heard.entries()) {
        expect(ms).toBeGreaterThan(speechMs[i]! * 0.8);
        expect(ms).toBeLessThan(speechMs[i]! + 1500);
      }
      // the batch STT's segments came from the session's stream: the model ran one stream, not two
      expect(streams).toHaveBeenCalledTimes(1);
    },
  );

  it('leaves a streaming STT as it is', () => {
    const vad = new SessionVad();
    const model = new BatchStt(true);
    expect(vad.streaming(model)).toBe(model);
  });
});
