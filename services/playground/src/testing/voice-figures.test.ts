import { CALLER_STT_PROVIDERS, CALLER_TTS_PROVIDERS } from '@vab/contracts';
import { describe, expect, it } from 'vitest';
import { providersFor } from '../models/providers.js';
import { initializeLogger, voice, type stt, type tts } from '@livekit/agents';
import { AudioFrame } from '@livekit/rtc-node';
import { pausePoint } from './caller-line.js';
import { CallerPlayback } from './caller-playback.js';
import { CallerVoice } from './voice-caller.js';

initializeLogger({ pretty: false, level: 'error' });
import { CallTimeline, FRAME_MS, voiceFigures } from './voice-figures.js';

/** A timeline from a picture: one character per 20 ms frame, `c` caller, `a` agent, `b` both, `.` neither. */
function timeline(picture: string, lines: { from: number; to: number; bargeIn?: boolean }[]) {
  const t = new CallTimeline();
  for (const ch of picture) t.add(ch === 'c' || ch === 'b', ch === 'a' || ch === 'b');
  for (const l of lines) t.lines.push({ startFrame: l.from, endFrame: l.to, bargeIn: l.bargeIn ?? false });
  return t;
}
const run = (s: string, n: number) => s.repeat(n);

describe('voice figures from the call timeline', () => {
  it('measures the response, the talk time and the silences the caller waited through', () => {
    // greeting 1 s, a 0.5 s pause (the caller's own time to answer), the line 2 s, 3 s of waiting, the answer
    const p = run('a', 50) + run('.', 25) + run('c', 100) + run('.', 150) + run('a', 50);
    const f = voiceFigures(timeline(p, [{ from: 75, to: 175 }]), { silenceBoundMs: 2000, heard: [] });
    expect(f.durationMs).toBe(p.length * FRAME_MS);
    expect(f.turns).toEqual([{ callerEndMs: 3500, responseMs: 3000 }]);
    expect(f.talkMs).toEqual({ agent: 2000, caller: 2000 });
    // the caller's own 0.5 s before its line is not the agent's silence; the 3 s wait is
    expect(f.longestSilenceMs).toBe(3000);
    expect(f.silences).toEqual([{ atMs: 3500, ms: 3000 }]);
    expect(f.agentInterruptions).toEqual({ count: 0, totalMs: 0 });
  });

  it('counts the agent starting inside a caller line (its pause included) as talking over it', () => {
    // the caller says half, pauses 1.5 s; the agent starts 1 s into the pause; the caller goes on over it
    const p =
      run('c', 50) + run('.', 50) + run('a', 25) + run('b', 25) + run('c', 25) + run('.', 25) + run('a', 20);
    const f = voiceFigures(timeline(p, [{ from: 0, to: 175 }]), { silenceBoundMs: 2000, heard: [] });
    expect(f.agentInterruptions.count).toBe(1);
    expect(f.agentInterruptions.totalMs).toBe(1000);
    // the pause inside the line is the caller's: no silence of the agent's
    expect(f.longestSilenceMs).toBe(500);
    expect(f.turns[0]!.responseMs).toBe(500);
  });

  it('measures how long the agent took to stop after a barge-in, and not a barge-in into silence', () => {
    const p = run('a', 100) + run('b', 30) + run('c', 50) + run('.', 20) + run('c', 20) + run('.', 10);
    const f = voiceFigures(
      timeline(p, [
        { from: 100, to: 180, bargeIn: true },
        { from: 200, to: 220, bargeIn: true },
      ]),
      { silenceBoundMs: 2000, heard: [] },
    );
    expect(f.bargeIns).toEqual([{ atMs: 2000, stopMs: 600 }]);
    // an agent that did not answer the last line: the caller waits until the call ends
    expect(f.turns.at(-1)).toEqual({ callerEndMs: 4400, responseMs: null });
  });

  it('finds the SNR of the received audio from speech and quiet frames', () => {
    const t = new CallTimeline();
    // noise power 100, speech power 10,000 (+ the noise): 20 dB
    for (let i = 0; i < 50; i++) t.add(false, false, 100);
    for (let i = 0; i < 50; i++) t.add(true, false, 10_100);
    expect(t.measuredSnrDb()).toBe(20);
  });
});

describe('the caller voice', () => {
  it('pauses at the word gap nearest the middle of a line', () => {
    const rate = 16000;
    const loud = (ms: number) => new Int16Array((ms / 1000) * rate).fill(3000);
    const quiet = (ms: number) => new Int16Array((ms / 1000) * rate);
    // words of 400 ms with gaps of 100 ms after the 1st, 2nd and 3rd: the middle gap is the second
    const parts = [loud(400), quiet(100), loud(400), quiet(100), loud(400), quiet(100), loud(400)];
    const pcm = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      pcm.set(p, at);
      at += p.length;
    }
    const cut = pausePoint(pcm);
    expect(cut / rate).toBeGreaterThan(0.9);
    expect(cut / rate).toBeLessThan(1.0);
  });

  it('behaves the same way again with the same seed, and another way with another', () => {
    const caller = (seed: number) =>
      new CallerVoice({
        tts: {} as tts.TTS,
        stt: {} as stt.STT,
        ttsId: { provider: 'openai', model: 'default' },
        sttId: { provider: 'openai', model: 'default' },
        behaviour: {
          midSentencePause: { ms: 500, chance: 0.5 },
          silenceBeforeAnswer: { ms: 500, chance: 0.5 },
          bargeIn: { afterMs: 500, chance: 0.5 },
        },
        send: () => undefined,
        seed,
      });
    const draws = (seed: number) => {
      const c = caller(seed);
      return Array.from({ length: 12 }, () => c.drawTurn());
    };
    expect(draws(7)).toEqual(draws(7));
    expect(draws(7)).not.toEqual(draws(8));
    // a chance of one half gives both outcomes over a call
    expect(new Set(draws(7).map((d) => d.pause)).size).toBe(2);
  });

  it('offers as its voice and ear exactly the providers this server runs as TTS and STT', () => {
    expect([...CALLER_TTS_PROVIDERS].sort()).toEqual(providersFor('tts').sort());
    expect([...CALLER_STT_PROVIDERS].sort()).toEqual(providersFor('stt').sort());
  });
});

describe('the caller hears the agent', () => {
  const loud = (ms: number) => new AudioFrame(new Int16Array(ms * 16).fill(3000), 16000, 1, ms * 16);

  it('plays segments in real time, each reported when its last frame has played, queued behind one another', async () => {
    const audible: number[] = [];
    const out = new CallerPlayback({ replyText: () => 'the reply', onAudible: (at) => audible.push(at) });
    const finished: { playbackPosition: number; interrupted: boolean }[] = [];
    out.on(voice.AudioOutput.EVENT_PLAYBACK_FINISHED, (ev) => finished.push(ev));
    await out.captureFrame(loud(100));
    out.flush();
    // the next reply arrives while the first still plays
    await out.captureFrame(loud(60));
    out.flush();
    const frame = new Int16Array(320);
    for (let i = 0; i < 5; i++) out.play(frame);
    expect(finished).toEqual([{ playbackPosition: 0.1, interrupted: false }]);
    for (let i = 0; i < 3; i++) out.play(frame);
    expect(finished).toHaveLength(2);
    expect(finished[1]!.playbackPosition).toBeCloseTo(0.06);
    expect(audible).toHaveLength(2);
    expect(out.pending).toBe(false);
  });

  it('an interruption drops what was not played and reports what was', async () => {
    const out = new CallerPlayback({ replyText: () => 'one two three four', onAudible: () => undefined });
    const finished: { playbackPosition: number; interrupted: boolean }[] = [];
    out.on(voice.AudioOutput.EVENT_PLAYBACK_FINISHED, (ev) => finished.push(ev));
    await out.captureFrame(loud(1000));
    out.play(new Int16Array(320));
    out.play(new Int16Array(320));
    out.clearBuffer();
    expect(finished).toEqual([expect.objectContaining({ playbackPosition: 0.04, interrupted: true })]);
    expect(out.pending).toBe(false);
    // the next reply is a segment of its own
    await out.captureFrame(loud(20));
    out.flush();
    out.play(new Int16Array(320));
    expect(finished).toHaveLength(2);
  });
});
