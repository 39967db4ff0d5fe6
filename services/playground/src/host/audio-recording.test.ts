import { initializeLogger, voice } from '@livekit/agents';
import { getFfmpegPath } from '@livekit/av';
import type { NatsConnection } from '@nats-io/transport-node';
import type { BusClient } from '@vab/bus';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BusAudioInput, BusAudioOutput } from '../transports/voice-socket/bus-audio.js';
import { AudioRecording, oggDurationMs, sweepSpools } from './audio-recording.js';
import type { EncoderHost } from './encoder-host.js';
import { SessionEvents } from './events.js';
import type { RecorderThread } from './recorder-thread.js';
import type { RecordingsBucket } from './recordings-bucket.js';

initializeLogger({ pretty: false, level: 'error' });

describe('a recording file', () => {
  it("is as long as its last page's granule position says, less the pre-skip", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ogg-'));
    const file = join(dir, 'a.ogg');
    // 2.5 s of a tone, stereo, at the recorder's rate, encoded as the recorder does
    const wav = join(dir, 'a.wav');
    execFileSync('sox', ['-n', '-r', '24000', '-c', '2', '-b', '16', wav, 'synth', '2.5', 'sine', '440']);
    execFileSync(getFfmpegPath()!, [
      '-v',
      'error',
      '-i',
      wav,
      '-c:a',
      'libopus',
      '-b:a',
      '32k',
      '-f',
      'ogg',
      file,
    ]);
    expect(await oggDurationMs(file)).toBe(2500);
    writeFileSync(join(dir, 'empty.ogg'), '');
    expect(await oggDurationMs(join(dir, 'empty.ogg'))).toBeUndefined();
    expect(await oggDurationMs(join(dir, 'missing.ogg'))).toBeUndefined();
  });
});

describe('the recording spools', () => {
  it("are swept at start when their process is gone, never a live process's", async () => {
    const dead = join(tmpdir(), 'vab-recordings-999999999');
    const live = join(tmpdir(), `vab-recordings-${process.ppid}`);
    for (const dir of [dead, live]) {
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'x.ogg'), 'x');
    }
    await sweepSpools(pino({ level: 'silent' }));
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(join(live, 'x.ogg'))).toBe(true);
  });
});

describe("a recording's zero", () => {
  afterEach(() => vi.restoreAllMocks());

  it('is the `at` of its recording_started event, the very number the record stores', async () => {
    const published: { type: string; at: number }[] = [];
    const nc = {
      publish: (_subject: string, data: Uint8Array) =>
        published.push(JSON.parse(Buffer.from(data).toString('utf8')) as { type: string; at: number }),
    } as unknown as NatsConnection;
    const log = pino({ level: 'silent' });
    const events = new SessionEvents(nc, 'agent-1', 'session-1', log);
    let ended: ((dropped: [number, number]) => void) | undefined;
    const timeline = {
      open: (_t0: number, _rate: number, sink: { ended(d: [number, number]): void }) => {
        ended = sink.ended;
        return 1;
      },
      flush: () => undefined,
      captured: () => undefined,
      end: () => ended?.([0, 0]),
    } as unknown as RecorderThread;
    const recording = new AudioRecording({
      bucket: {} as RecordingsBucket,
      encoders: {} as EncoderHost,
      timeline,
      bus: {} as BusClient,
      agentId: 'agent-1',
      sessionId: `zero-${process.pid}`,
      emit: (event, at) => events.emit(event, at),
      log,
      timeoutMs: 1000,
    });
    const session = new voice.AgentSession({});
    session.input.audio = new BusAudioInput(16000);
    session.output.audio = new BusAudioOutput({
      sampleRate: 16000,
      send: () => undefined,
      replyText: () => undefined,
      ackGraceMs: 1000,
    });
    // a clock that moves on each time it is read: a second reading is never the same millisecond
    let now = Date.now();
    vi.spyOn(Date, 'now').mockImplementation(() => ++now);
    await recording.begin(session);
    vi.restoreAllMocks();
    const zero = session._recorderIO?.recordingStartedAt;
    expect(zero).toEqual(expect.any(Number));
    expect(published.filter((e) => e.type === 'recording_started').map((e) => e.at)).toEqual([zero]);
    await recording.finish();
  });
});
