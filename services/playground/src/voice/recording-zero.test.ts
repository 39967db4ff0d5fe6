import { initializeLogger, voice } from '@livekit/agents';
import type { NatsConnection } from '@nats-io/transport-node';
import type { BusClient } from '@vab/bus';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AudioRecording } from '../recording/audio-recording.js';
import type { EncoderHost } from '../recording/encoder-host.js';
import type { RecorderThread } from '../recording/recorder-thread.js';
import type { RecordingsBucket } from '../recording/recordings-bucket.js';
import { SessionEvents } from '../sessions/events.js';
import { BusAudioInput, BusAudioOutput } from './bus-audio.js';

initializeLogger({ pretty: false, level: 'error' });

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
      // nothing stored: this test is about the recording's zero
      bucket: {
        flushMs: 60_000,
        chunks: () => ({
          add: () => undefined,
          write: async () => {},
          seal: async () => {},
          discard: async () => {},
          bytes: 0,
          unwritten: 0,
        }),
      } as unknown as RecordingsBucket,
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
