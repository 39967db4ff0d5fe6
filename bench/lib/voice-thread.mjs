// A playground thread as `bench/voice.mjs --threads N` runs it: the playground's own thread (thread-main.js),
// and what the benchmark measures inside it between its `probe-start` and `probe-stop`: the thread's event-loop
// delay (as the in-process run measures the process's), its collector's pauses, its heap, and the most
// sessions it held at once.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { clearInterval, setInterval } from 'node:timers';
import { parentPort } from 'node:worker_threads';
import { processMetrics } from '@vab/service-kit';

let probe;
/** The heap when the benchmark's callers start connecting (as the in-process run takes it). */
let heapMark = process.memoryUsage().heapUsed;

/** The voice sessions this thread holds now (its playground_sessions_active gauge). */
async function sessionsNow() {
  const gauge = processMetrics().registry.getSingleMetric('playground_sessions_active');
  if (!gauge) return 0;
  const { values } = await gauge.get();
  return values.find((v) => v.labels.session_type === 'voice')?.value ?? 0;
}

parentPort.on('message', async (msg) => {
  if (msg.type === 'heap-mark') heapMark = process.memoryUsage().heapUsed;
  else if (msg.type === 'probe-start') {
    const delay = monitorEventLoopDelay({ resolution: 5 });
    const pauses = [];
    const gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) pauses.push({ ms: e.duration, kind: e.detail?.kind });
    });
    gc.observe({ entryTypes: ['gc'] });
    probe = { delay, gc, pauses, peak: 0 };
    probe.timer = setInterval(async () => (probe.peak = Math.max(probe.peak, await sessionsNow())), 500);
    delay.enable();
  } else if (msg.type === 'probe-stop' && probe) {
    const { delay, gc, pauses, peak, timer } = probe;
    delay.disable();
    gc.disconnect();
    clearInterval(timer);
    probe = undefined;
    parentPort.postMessage({
      type: 'probe',
      p50: delay.percentile(50) / 1e6,
      p99: delay.percentile(99) / 1e6,
      pauses,
      heapDelta: process.memoryUsage().heapUsed - heapMark,
      peakSessions: peak,
    });
  }
});

await import('../../services/playground/dist/threads/thread-main.js');
