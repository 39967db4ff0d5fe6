import { parentPort, workerData } from 'node:worker_threads';
import { AudioResampler, dispose as disposeLiveKit } from '@livekit/rtc-node';
import { safeError } from '@vab/bus';
import { configOrExit, createLogger, processMetrics, type Check, type StopMode } from '@vab/service-kit';
import { loadConfig } from '../config.js';
import { haltNativeInference } from '../models/native-inference.js';
import { redactingDestination } from '../sessions/redactor.js';
import { runPlaygroundInstance } from './instance.js';
import type { FromThread, ThreadData, ToThread } from './messages.js';

/**
 * A worker thread of a playground process: one playground instance (threads/instance.ts) with its own event
 * loop, heap and collector, its lifecycle driven by the main thread (threads/supervisor.ts), which owns the
 * process's signals, its ops port and its log stream.
 */
const port = parentPort!;
const { index, rooms } = workerData as ThreadData;
const send = (msg: FromThread) => port.postMessage(msg);

// LiveKit's native side (@livekit/rtc-node) sends its events — a room's, an audio stream's — to the thread that
// initialized it last, for the whole process. Every thread but the rooms thread initializes it now; the main
// thread starts the rooms thread after every other is up, so LiveKit's events reach the one thread that waits
// for them. The others only ever make synchronous calls (a resampler), which answer on the calling thread.
if (!rooms) new AudioResampler(48_000, 16_000).close();

// the supervisor gave this thread its environment: its INSTANCE_ID, its share of MAX_SESSIONS, no ops port
const config = configOrExit('playground', () => loadConfig(process.env));

// the line goes to the main thread whole (one stream for the process: lines of threads never interleave)
const logDestination = redactingDestination({ write: (line: string) => send({ type: 'log', line }) });

/** How long an ending thread waits for its native inference: one takes ~1-10 ms, longer on a busy machine. */
const NATIVE_HALT_MS = 5_000;
// An uncaught error ends this thread (and the main thread then ends the process, decision 37). It is logged
// here, through this thread's redactor — its message can carry what a provider or a flow said, a key among it
// — and not by the main thread, which knows no credential in play. The line is posted before the thread exits
// (a worker's messages are delivered before its exit). The thread exits once no native inference is in flight:
// an answer reaching an exited thread aborts the process, the other threads' sessions undrained
// (models/native-inference.ts).
process.on('uncaughtException', (err) => {
  createLogger('playground', 'fatal', logDestination, { base: { thread: String(index) } }).fatal(
    { code: 'THREAD_CRASHED', err: safeError(err) },
    'playground thread crashed',
  );
  void haltNativeInference(NATIVE_HALT_MS).finally(() => process.exit(1));
});

let stop: ((reason: string, mode: StopMode) => void) | undefined;
let checks: Record<string, Check> = {};
let disposeAllowed!: (native: boolean) => void;
/** Every other thread has ended; whether LiveKit's native side is to be disposed of (none died). */
const othersEnded = new Promise<boolean>((resolve) => (disposeAllowed = resolve));

port.on('message', (msg: ToThread) => {
  switch (msg.type) {
    case 'stop':
      stop?.(msg.reason, msg.mode);
      return;
    case 'metrics':
      void processMetrics()
        .registry.getMetricsAsJSON()
        .then(
          (metrics) => send({ type: 'metrics', id: msg.id, metrics }),
          () => send({ type: 'metrics', id: msg.id, metrics: [] }),
        );
      return;
    case 'checks': {
      const names = Object.keys(checks);
      void Promise.all(names.map((n) => checks[n]!().catch(() => false))).then((up) =>
        send({ type: 'checks', id: msg.id, results: Object.fromEntries(names.map((n, i) => [n, up[i]!])) }),
      );
      return;
    }
    case 'dispose':
      disposeAllowed(msg.native);
      return;
  }
});

runPlaygroundInstance(config, {
  logDestination,
  logFields: { thread: String(index) },
  rooms,
  host: {
    stopOn: (s) => (stop = s),
    ready: () => send({ type: 'ready' }),
    checks: (c) => (checks = c),
  },
  dispose: async () => {
    // a stopped thread exits too (its sessions ended, a VAD's or end-of-turn answer may still be on libuv's
    // pool): only once none is in flight, as a crashed one does
    await haltNativeInference(NATIVE_HALT_MS);
    // LiveKit's native side is the process's: ended once, by the rooms thread, after every other thread ended
    if (rooms && (await othersEnded)) await disposeLiveKit();
  },
});
