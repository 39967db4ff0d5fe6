import { AudioFrame } from '@livekit/rtc-node';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { RecorderThread } from './recorder-thread.js';

const RATE = 16_000;
const ms = (n: number) => (RATE * n) / 1000;
const frame = (value: number, samples: number, rate = RATE) =>
  new AudioFrame(new Int16Array(samples).fill(value), rate, 1, samples);

/** A recording's blocks, interleaved stereo, once its timeline has ended. */
function record(thread: RecorderThread, t0: number) {
  const blocks: Int16Array[] = [];
  let id!: number;
  const ended = new Promise<[number, number]>((resolve, reject) => {
    id = thread.open(t0, RATE, { block: (pcm) => blocks.push(pcm), ended: resolve, failed: reject });
  });
  const pcm = () => {
    const all = new Int16Array(blocks.reduce((n, b) => n + b.length, 0));
    let at = 0;
    for (const b of blocks) {
      all.set(b, at);
      at += b.length;
    }
    return { left: all.filter((_, i) => i % 2 === 0), right: all.filter((_, i) => i % 2 === 1) };
  };
  return { id, ended, pcm };
}

describe("the recordings' timeline thread", () => {
  let thread: RecorderThread | undefined;
  afterEach(async () => thread?.stop());

  it('places each channel where its audio began, silent between, as LiveKit does, in settled blocks', async () => {
    thread = new RecorderThread(pino({ level: 'silent' }));
    const t0 = 1_000_000;
    const rec = record(thread, t0);
    // the caller from 100 ms for 40 ms; the agent from 200 ms for 80 ms, in two frames; then the caller at
    // 8 kHz from 400 ms (resampled to the recording's rate)
    thread.captured(rec.id, 0, t0 + 100, frame(1000, ms(40)), false);
    thread.captured(rec.id, 1, t0 + 200, frame(-2000, ms(40)), true);
    thread.captured(rec.id, 1, t0 + 240, frame(-2000, ms(40)), true);
    thread.flush(rec.id, t0 + 300);
    for (let i = 0; i < 5; i++) thread.captured(rec.id, 0, t0 + 400 + i * 40, frame(3000, 320, 8000), false);
    thread.flush(rec.id, t0 + 700);
    thread.end(rec.id);
    expect(await rec.ended).toEqual([0, 0]);

    const { left, right } = rec.pcm();
    expect(left.length).toBe(ms(700));
    const at = (ch: Int16Array, fromMs: number, toMs: number) => [...new Set(ch.slice(ms(fromMs), ms(toMs)))];
    expect(at(left, 0, 100)).toEqual([0]);
    expect(at(left, 100, 140)).toEqual([1000]);
    expect(at(left, 140, 400)).toEqual([0]);
    // away from the resampler's edges, the level it was sent at (give or take its rounding)
    for (const v of at(left, 450, 500)) expect(Math.abs(v - 3000)).toBeLessThanOrEqual(2);
    expect(at(right, 0, 200)).toEqual([0]);
    expect(at(right, 200, 280)).toEqual([-2000]);
    expect(at(right, 280, 700)).toEqual([0]);
  });

  it('counts what arrives after its place was written, and keeps recordings apart', async () => {
    thread = new RecorderThread(pino({ level: 'silent' }));
    const a = record(thread, 0);
    const b = record(thread, 0);
    thread.flush(a.id, 100);
    thread.captured(a.id, 0, 0, frame(500, ms(40)), false);
    thread.captured(b.id, 0, 0, frame(700, ms(40)), false);
    thread.flush(b.id, 100);
    // the recorder's last flush (its close) is where a late frame is found out
    thread.flush(a.id, 200);
    thread.end(a.id);
    thread.end(b.id);
    expect(await a.ended).toEqual([ms(40), 0]);
    expect(await b.ended).toEqual([0, 0]);
    expect([...new Set(a.pcm().left)]).toEqual([0]);
    expect([...new Set(b.pcm().left.slice(0, ms(40)))]).toEqual([700]);
  });

  it("fails the recordings it holds when it stops, and does not touch a caller's frame", async () => {
    thread = new RecorderThread(pino({ level: 'silent' }));
    const rec = record(thread, 0);
    const caller = frame(900, ms(40));
    thread.captured(rec.id, 0, 0, caller, false);
    // past the batch's send: a frame moved to the thread instead of copied would be detached (empty) by now
    await new Promise((r) => setTimeout(r, 250));
    expect(caller.data.length).toBe(ms(40));
    expect([...new Set(caller.data)]).toEqual([900]);
    await thread.stop();
    await expect(rec.ended).rejects.toThrow(/stopped/);
  });
});
