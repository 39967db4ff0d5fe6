import { initializeLogger } from '@livekit/agents';
import { VOICE_SAMPLE_RATES } from '@vab/contracts';
import { describe, expect, it } from 'vitest';
import { BusAudioInput, INPUT_FRAME_MS } from './bus-audio.js';

initializeLogger({ pretty: false, level: 'error' });

const RATE = 16000;
/** One frame of `INPUT_FRAME_MS` at 16 kHz, every sample `value`: a frame read tells which it was. */
const frameOf = (value: number) => new Int16Array((RATE * INPUT_FRAME_MS) / 1000).fill(value);

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

  it('holds about 5 s for a stalled reader and drops what comes after, then carries on when read', async () => {
    const input = new BusAudioInput(RATE);
    const held = 5000 / INPUT_FRAME_MS;
    // 6 s of audio while nothing reads: frame i holds the value i
    for (let i = 0; i < 6000 / INPUT_FRAME_MS; i++) input.push(frameOf(i));
    const reader = input.stream.getReader();
    const firsts: number[] = [];
    for (let i = 0; i < held; i++) firsts.push((await reader.read()).value!.data[0]!);
    expect(firsts).toEqual(Array.from({ length: held }, (_, i) => i));
    input.push(frameOf(-7));
    expect((await reader.read()).value!.data[0]).toBe(-7);
    reader.releaseLock();
    await input.close();
  });

  it('is read again by the next reader once the last releases it (an agent handover), and ends at close', async () => {
    const input = new BusAudioInput(RATE);
    const first = input.stream.getReader();
    input.push(frameOf(1));
    expect((await first.read()).value!.data[0]).toBe(1);
    const pending = first.read();
    first.releaseLock();
    await expect(pending).rejects.toThrow();
    const second = input.stream.getReader();
    input.push(frameOf(2));
    expect((await second.read()).value!.data[0]).toBe(2);
    await input.close();
    expect((await second.read()).done).toBe(true);
    // what a late message brings after the close is dropped, not thrown at the bus subscription
    expect(() => input.push(frameOf(3))).not.toThrow();
  });

  it('takes nothing more once its reader cancels it, and still closes', async () => {
    const input = new BusAudioInput(RATE);
    const reader = input.stream.getReader();
    await reader.cancel();
    expect(() => input.push(frameOf(0))).not.toThrow();
    await expect(input.close()).resolves.toBeUndefined();
  });
});
