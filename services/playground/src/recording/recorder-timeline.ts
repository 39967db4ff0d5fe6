/**
 * The recordings' timeline, on a thread of its own: LiveKit's recorder (`RecorderIO`) places every captured
 * frame of both channels on one timeline (`Track`: mono, converted to float, resampled when the rates differ)
 * and every 2.5 s interleaves the settled window into 16-bit stereo PCM for the encoder. In the playground's
 * event loop that was per-frame work and a burst per session every 2.5 s, plus the garbage of both: at 50
 * recorded sessions the loop's delay p99 went from 17 to 38–47 ms (docs/performance.md › Voice). Here the very
 * same `Track` of @livekit/agents 1.9.0 does it; the playground only posts frames and writes the blocks back.
 *
 * Protocol (`TimelineIn` in batches, `TimelineOut`; in order per recording): `open` a recording's timeline, `captured`
 * frames and `flush` up to a wall time (each flush answers a `block` of interleaved PCM when it settled any),
 * `end` (answers `ended`, with what arrived too late to be placed).
 */
import { parentPort, type MessagePort } from 'node:worker_threads';
import { AudioFrame } from '@livekit/rtc-node';
import { agentsModule } from './agents-module.js';

export type TimelineIn =
  | { op: 'open'; id: number; t0: number; sampleRate: number }
  | {
      op: 'captured';
      id: number;
      channel: 0 | 1;
      startedAt: number;
      sampleRate: number;
      channels: number;
      data: Int16Array;
    }
  | { op: 'flush'; id: number; until: number }
  | { op: 'end'; id: number };

export type TimelineOut =
  | { op: 'block'; id: number; pcm: Int16Array }
  | { op: 'ended'; id: number; droppedSamples: [number, number] };

/** LiveKit's `Track` (recorder_io.js), as this module uses it. */
interface Track {
  push(startedAt: number, frame: AudioFrame): void;
  take(start: number, end: number): Float32Array;
  close(): void;
  droppedSamples: number;
}
type TrackClass = new (sampleRate: number, t0: number) => Track;

interface Timeline {
  t0: number;
  sampleRate: number;
  tracks: [Track, Track];
  /** The sample up to which the PCM has been handed out. */
  cursor: number;
}

if (!parentPort) throw new Error('recorder-timeline runs as a worker thread');
const port: MessagePort = parentPort;

const { Track } = await agentsModule<{ Track: TrackClass }>('voice', 'recorder_io', 'recorder_io.js');
const timelines = new Map<number, Timeline>();

/** As LiveKit's `writePCM`: both channels interleaved, clipped to 16 bits. */
function interleave(left: Float32Array, right: Float32Array): Int16Array {
  const stereo = new Int16Array(left.length * 2);
  for (let i = 0; i < left.length; i++) {
    stereo[i * 2] = Math.max(-32768, Math.min(32767, Math.round(left[i]! * 32768)));
    stereo[i * 2 + 1] = Math.max(-32768, Math.min(32767, Math.round(right[i]! * 32768)));
  }
  return stereo;
}

function handle(msg: TimelineIn): void {
  if (msg.op === 'open') {
    const tracks: [Track, Track] = [new Track(msg.sampleRate, msg.t0), new Track(msg.sampleRate, msg.t0)];
    timelines.set(msg.id, { t0: msg.t0, sampleRate: msg.sampleRate, tracks, cursor: 0 });
    return;
  }
  const timeline = timelines.get(msg.id);
  if (!timeline) return;
  if (msg.op === 'captured') {
    const samples = msg.data.length / msg.channels;
    timeline.tracks[msg.channel].push(
      msg.startedAt,
      new AudioFrame(msg.data, msg.sampleRate, msg.channels, samples),
    );
    return;
  }
  if (msg.op === 'flush') {
    // as LiveKit's encode task: the settled window [cursor, until) of both channels
    const end = Math.round(((msg.until - timeline.t0) / 1000) * timeline.sampleRate);
    if (end <= timeline.cursor) return;
    const [input, output] = timeline.tracks;
    const pcm = interleave(input.take(timeline.cursor, end), output.take(timeline.cursor, end));
    timeline.cursor = end;
    if (pcm.length > 0)
      port.postMessage({ op: 'block', id: msg.id, pcm } satisfies TimelineOut, [pcm.buffer as ArrayBuffer]);
    return;
  }
  timelines.delete(msg.id);
  for (const track of timeline.tracks) track.close();
  const droppedSamples: [number, number] = [
    timeline.tracks[0].droppedSamples,
    timeline.tracks[1].droppedSamples,
  ];
  port.postMessage({ op: 'ended', id: msg.id, droppedSamples } satisfies TimelineOut);
}

// in batches, in order (recorder-thread.ts says why)
port.on('message', (batch: TimelineIn[]) => {
  for (const msg of batch) handle(msg);
});
