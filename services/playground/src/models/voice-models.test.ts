import {
  asLanguageCode,
  inference,
  initializeLogger,
  stt,
  VADEventType,
  type VADEvent,
} from '@livekit/agents';
import local from '@livekit/local-inference';
import { AudioFrame } from '@livekit/rtc-node';
import { describe, expect, it, vi } from 'vitest';
import { NativeVadStream, VAD_OPTIONS } from './native-vad.js';
import { compile } from '@vab/flow';
import { concat, fullFlow, silence, speak, withNode } from '@vab/testkit';
import { PHONE_TURN_DEFAULTS, phoneTurnSettings, prewarmVoiceModels, SessionVad } from './voice-models.js';

initializeLogger({ pretty: false, level: 'error' });

const RATE = 16000;

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
      const streams = vi.spyOn(local, 'createVad');
      const vad = new SessionVad();
      const batch = new BatchStt();
      const transcriber = vad.streaming(batch);
      expect(transcriber.capabilities.streaming).toBe(true);

      // as LiveKit's audio recognition does: the same frames to the VAD's stream and to the STT's, each a
      // stream of its own that the VAD and the STT read
      const session = vad.stream();
      const transcription = transcriber.stream();
      const [toVad, toStt] = [session, transcription].map(feedOf);
      const first = speak('I would like to book a table for two.');
      const second = speak('Tomorrow at seven, please.');
      const audio = concat(silence(300), first, silence(900), second, silence(900));
      await inRealTime(audio, RATE, 20, (f) => {
        toVad!.enqueue(f);
        toStt!.enqueue(f);
      });

      // the STT's copy of the audio was read as it came (nothing piles up), though only the segments are heard
      expect(toStt!.desiredSize).toBe(1);

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

  // LiveKit's own stream is the reference: ours must say exactly what it says, only cheaper
  for (const rate of [16000, 48000, 8000]) {
    it(
      `says what LiveKit's inference VAD says of the same speech (${rate} Hz; event for event at the model's own rate)`,
      { timeout: 30_000 },
      async () => {
        prewarmVoiceModels();
        // speech at the client's rate, as a client at that rate sends it
        const audio = concat(
          silence(300, rate),
          speak('I would like to book a table for two.', rate),
          silence(600, rate),
          speak('Tomorrow at seven.', rate),
          silence(1000, rate),
        );
        const ours = new SessionVad().stream();
        const theirs = new inference.VAD(VAD_OPTIONS).stream();
        const frame = (rate * 40) / 1000;
        await inRealTime(audio, rate, 40, (f) => {
          ours.pushFrame(f);
          theirs.pushFrame(f);
        });
        const windows = Math.floor((((Math.floor(audio.length / frame) * frame) / rate) * RATE) / 512);
        const [a, b] = await Promise.all([eventsOf(ours, windows), eventsOf(theirs, windows)]);
        ours.close();
        theirs.close();
        expect(a.filter((e) => e.type === VADEventType.END_OF_SPEECH)).toHaveLength(2);
        // the resampler keeps a few samples back: both streams end on the same window, whatever it is
        expect(a.length).toBeGreaterThan(windows * 0.95);
        if (rate === RATE) {
          // all the same but where an end of speech is dated: ours no later (its silence no shorter) than theirs
          const ends = (events: typeof a) => events.filter((e) => e.type === VADEventType.END_OF_SPEECH);
          for (const [i, end] of ends(a).entries()) {
            expect(end.silenceDuration).toBeGreaterThanOrEqual(ends(b)[i]!.silenceDuration);
            expect(end.speechDuration).toBeLessThanOrEqual(ends(b)[i]!.speechDuration);
          }
          expect(a.map(undated)).toEqual(b.map(undated));
        } else {
          // a resampler dithers (±2 of 32768, at random): the same speech, but not the same bits twice
          const segments = (events: typeof a) =>
            events.filter((e) => e.type !== VADEventType.INFERENCE_DONE).map((e) => [e.type, e.samplesIndex]);
          const [ourSegments, theirSegments] = [segments(a), segments(b)];
          expect(ourSegments.map(([type]) => type)).toEqual(theirSegments.map(([type]) => type));
          for (const [i, [, at]] of ourSegments.entries())
            expect(Math.abs(at! - theirSegments[i]![1]!)).toBeLessThanOrEqual(1024);
        }
      },
    );
  }
  it(
    "says what LiveKit's says around a flush in mid-speech, each hearing its audio from a stream",
    { timeout: 30_000 },
    async () => {
      prewarmVoiceModels();
      const speech = concat(silence(300), speak('I would like to book a table for two, tomorrow at seven.'));
      // whole 40 ms frames that are whole 32 ms windows too: 160 ms is both
      const unit = (RATE * 160) / 1000;
      const cut = Math.floor(speech.length / 2 / unit) * unit;
      const parts = [
        speech.subarray(0, cut),
        concat(speech.subarray(cut, Math.floor(speech.length / unit) * unit), new Int16Array(unit * 6)),
      ];
      const ours = new SessionVad().stream();
      const theirs = new inference.VAD(VAD_OPTIONS).stream();
      const feeds = [ours, theirs].map(feedOf);
      const heard: [unknown[], unknown[]] = [[], []];
      let beforeFlush = 0;
      for (const [n, part] of parts.entries()) {
        await inRealTime(part, RATE, 40, (f) => {
          for (const feed of feeds) feed.enqueue(f);
        });
        const [a, b] = await Promise.all([
          eventsOf(ours, part.length / 512),
          eventsOf(theirs, part.length / 512),
        ]);
        heard[0].push(...a);
        heard[1].push(...b);
        // mid-speech: the first part ends inside the sentence
        if (n === 0) {
          expect(a.some((e) => e.type === VADEventType.START_OF_SPEECH)).toBe(true);
          beforeFlush = a.length;
          ours.flush();
          theirs.flush();
        }
      }
      ours.close();
      theirs.close();
      // all the same but where the end of speech is dated (above)
      const undatedAll = (events: unknown[]) => (events as { type: VADEventType }[]).map(undated);
      expect(undatedAll(heard[0])).toEqual(undatedAll(heard[1]));
      // after the flush the count starts again, and the speech that goes on starts anew
      const second = heard[0].slice(beforeFlush) as { type: VADEventType; samplesIndex: number }[];
      expect(second[0]).toMatchObject({ type: VADEventType.INFERENCE_DONE, samplesIndex: 512 });
      expect(second.some((e) => e.type === VADEventType.START_OF_SPEECH)).toBe(true);
    },
  );
});

/** An event without the dating of an end of speech (its silence and speech durations), where ours differs. */
const undated = <E extends { type: VADEventType }>(e: E) =>
  e.type === VADEventType.END_OF_SPEECH ? { ...e, silenceDuration: 0, speechDuration: 0 } : e;

describe("where the session's VAD dates the end of speech", () => {
  /** The audio's last sample at or over `level`, in ms: where its sound ends. */
  const soundEndMs = (pcm: Int16Array, rate: number, level = 500) => {
    let last = pcm.length - 1;
    while (last > 0 && Math.abs(pcm[last]!) < level) last--;
    return ((last + 1) / rate) * 1000;
  };

  /** Each END_OF_SPEECH's dating (ms of audio), by a stream dating by sound or as LiveKit does. */
  async function endsOf(audio: Int16Array, rate: number, soundDating: boolean): Promise<number[]> {
    const stream = new NativeVadStream(new SessionVad(), undefined, VAD_OPTIONS, soundDating);
    const frame = (rate * 20) / 1000;
    for (let i = 0; i + frame <= audio.length; i += frame)
      stream.pushFrame(new AudioFrame(audio.slice(i, i + frame), rate, 1, frame));
    stream.endInput();
    const ends: number[] = [];
    for await (const ev of stream)
      if (ev.type === VADEventType.END_OF_SPEECH) ends.push(stream.lastSpeechEndMs!);
    stream.close();
    return ends;
  }

  // the audio's clock, not the wall's: frames pushed at once, each end read off the stream
  for (const rate of [8000, 16000]) {
    it(`dates it where the sound ended, not where the model's probability fell (${rate} Hz)`, async () => {
      prewarmVoiceModels();
      const speech = speak('I would like to book a table for two tonight.', {
        voice: 'festival',
        sampleRate: rate,
      });
      const audio = concat(silence(300, rate), speech, silence(1000, rate));
      const sound = soundEndMs(audio, rate);
      const [ours] = await endsOf(audio, rate, true);
      const [livekits] = await endsOf(audio, rate, false);
      // within a 10 ms block past the last sample over −36 dBFS (and its fade), and never later than LiveKit's
      expect(ours! - sound).toBeGreaterThanOrEqual(-10);
      expect(ours! - sound).toBeLessThanOrEqual(30);
      expect(ours!).toBeLessThanOrEqual(livekits!);
    });
  }

  it('dates it as the model does on a line whose noise goes on after the speech', async () => {
    prewarmVoiceModels();
    const rate = 16000;
    const speech = speak('I would like to book a table for two tonight.', {
      voice: 'festival',
      sampleRate: rate,
    });
    const audio = concat(silence(300, rate), speech, silence(1000, rate));
    // hiss at −30 dBFS, seeded: loud enough to count as sound, nothing the model takes for speech
    let seed = 1;
    for (let i = 0; i < audio.length; i++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      audio[i] = Math.max(
        -32768,
        Math.min(32767, audio[i]! + Math.round(((seed / 0x7fffffff) * 2 - 1) * 1800)),
      );
    }
    const ours = await endsOf(audio, rate, true);
    const livekits = await endsOf(audio, rate, false);
    expect(ours.length).toBeGreaterThan(0);
    expect(ours).toEqual(livekits);
  });
});

/** A stream `stream` reads its audio from (as LiveKit's audio recognition hands it one), and its feed. */
function feedOf(stream: {
  updateInputStream(audio: ReadableStream<AudioFrame>): void;
}): ReadableStreamDefaultController<AudioFrame> {
  let controller!: ReadableStreamDefaultController<AudioFrame>;
  stream.updateInputStream(new ReadableStream<AudioFrame>({ start: (c) => void (controller = c) }));
  return controller;
}

/** `audio` in frames of `frameMs`, each handed to `each` when a caller's microphone would have it. */
async function inRealTime(
  audio: Int16Array,
  rate: number,
  frameMs: number,
  each: (frame: AudioFrame) => void,
): Promise<void> {
  const frame = (rate * frameMs) / 1000;
  const started = performance.now();
  for (let i = 0; i + frame <= audio.length; i += frame) {
    each(new AudioFrame(audio.slice(i, i + frame), rate, 1, frame));
    const due = started + ((i + frame) / rate) * 1000;
    await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
  }
}

/** `n` of a stream's inference windows and the segment events among them, each as plain fields. */
async function eventsOf(stream: AsyncIterable<VADEvent>, n: number) {
  const events: (Omit<VADEvent, 'frames' | 'inferenceDuration'> & { samples: number[][] })[] = [];
  let windows = 0;
  const deadline = Date.now() + 20_000;
  const it = stream[Symbol.asyncIterator]();
  while (windows < n && Date.now() < deadline) {
    const next = await Promise.race([
      it.next(),
      new Promise<undefined>((r) => setTimeout(() => r(undefined), 1000)),
    ]);
    if (!next) break;
    if (next.done) break;
    const ev = next.value;
    if (ev.type === VADEventType.INFERENCE_DONE) windows++;
    events.push({
      type: ev.type,
      samplesIndex: ev.samplesIndex,
      timestamp: ev.timestamp,
      speechDuration: ev.speechDuration,
      silenceDuration: ev.silenceDuration,
      probability: ev.probability,
      speaking: ev.speaking,
      rawAccumulatedSilence: ev.rawAccumulatedSilence,
      rawAccumulatedSpeech: ev.rawAccumulatedSpeech,
      samples: ev.frames.map((f) => [f.sampleRate, f.samplesPerChannel, checksum(f.data)]),
    });
  }
  return events;
}

const checksum = (data: Int16Array) => data.reduce((h, v) => (h * 31 + v) | 0, 7);

describe('a phone call’s turn settings', () => {
  const agentOf = (params: Record<string, unknown>) => {
    const r = compile(withNode(fullFlow(), 'agent', params));
    if (!r.ok) throw new Error(JSON.stringify(r.issues));
    return r.config.agent;
  };

  it('take the phone’s defaults where the agent node names none', () => {
    const phone = phoneTurnSettings(agentOf({}));
    expect(phone).toMatchObject(PHONE_TURN_DEFAULTS);
    expect(phone.minEndpointingDelay).toBe(600);
    expect(phone.minInterruptionDuration).toBe(700);
  });

  it('keep what the builder set on the node, and max ≥ min', () => {
    const phone = phoneTurnSettings(agentOf({ minEndpointingDelay: 500, minInterruptionDuration: '300' }));
    expect(phone).toMatchObject({
      minEndpointingDelay: 500,
      minInterruptionDuration: 300,
      falseInterruptionTimeout: 1500,
    });
    const long = phoneTurnSettings(agentOf({ minEndpointingDelay: 2500, maxEndpointingDelay: 2500 }));
    expect(long).toMatchObject({ minEndpointingDelay: 2500, maxEndpointingDelay: 2500 });
  });
});
