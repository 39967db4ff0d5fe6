import { initializeLogger } from '@livekit/agents';
import { VOICE_SAMPLE_RATES } from '@vab/contracts';
import { describe, expect, it } from 'vitest';
import { BusAudioInput, INPUT_FRAME_MS } from './bus-audio.js';

initializeLogger({ pretty: false, level: 'error' });

describe("the client's audio as LiveKit hears it", () => {
  it('arrives in whole frames of INPUT_FRAME_MS, every sample in order, whatever the client sends', async () => {
    const rate = 16000;
    const input = new BusAudioInput(rate);
    const reader = input.stream.getReader();
    // the client's 20 ms messages, then one of 30 ms: 110 ms in all, sample values counting up
    const sizes = [320, 320, 320, 320, 480];
    let next = 0;
    for (const n of sizes) input.push(Int16Array.from({ length: n }, () => next++));

    const perFrame = (rate * INPUT_FRAME_MS) / 1000;
    const whole = Math.floor(next / perFrame);
    const heard: number[] = [];
    for (let i = 0; i < whole; i++) {
      const { value } = await reader.read();
      expect(value!.sampleRate).toBe(rate);
      expect(value!.samplesPerChannel).toBe(perFrame);
      heard.push(...value!.data);
    }
    expect(heard).toEqual(Array.from({ length: whole * perFrame }, (_, i) => i));
    reader.releaseLock();
    await input.close();
  });

  it('is a whole number of samples at every rate a client may declare', () => {
    for (const rate of VOICE_SAMPLE_RATES)
      expect(Number.isInteger((rate * INPUT_FRAME_MS) / 1000)).toBe(true);
  });

  it("shows the recorder's tap each frame as LiveKit gets it, until it is untapped", async () => {
    const rate = 16000;
    const input = new BusAudioInput(rate);
    const reader = input.stream.getReader();
    const perFrame = (rate * INPUT_FRAME_MS) / 1000;
    const tapped: number[] = [];
    const untap = input.tap((frame) => tapped.push(frame.data[0]!));
    input.push(new Int16Array(perFrame).fill(1));
    input.push(new Int16Array(perFrame).fill(2));
    untap();
    input.push(new Int16Array(perFrame).fill(3));
    const heard: number[] = [];
    for (let i = 0; i < 3; i++) heard.push((await reader.read()).value!.data[0]!);
    expect(heard).toEqual([1, 2, 3]);
    expect(tapped).toEqual([1, 2]);
    reader.releaseLock();
    await input.close();
  });
});
