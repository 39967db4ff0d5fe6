import { AggregatorRegistry, Registry } from 'prom-client';
import type { ThreadMetrics } from './messages.js';

/**
 * What a thread's registry holds that is the process's, not the thread's: CPU, memory, file descriptors, start
 * time and version are measured for the whole process whichever thread asks, so only the main thread's count.
 */
const PROCESS_WIDE = /^process_|^nodejs_version_info$/;

/**
 * One exposition for the process: the main thread's own metrics (the process's CPU and memory, its checks) and
 * each thread's, every series of a thread labelled `thread="<i>"`. A family both have (the event loop's lag,
 * the heap, the collector) is labelled on the main thread's series too, `thread="main"`. A series comes from
 * one registry only, so prom-client's aggregation (its AggregatorRegistry, meant for cluster workers) only
 * gathers them under one HELP and TYPE per family: nothing is summed.
 */
export function mergeMetrics(
  own: ThreadMetrics,
  threads: { thread: number; metrics: ThreadMetrics }[],
): Registry {
  const labelled = (metrics: ThreadMetrics, thread: string): ThreadMetrics =>
    metrics.map((m) => ({
      ...m,
      // each series is alone under its labels: `sum` keeps it as it is (`omit`, `average`… would not)
      aggregator: 'sum',
      values: m.values.map((v) => ({ ...v, labels: { ...v.labels, thread } })),
    }));
  const fromThreads = threads.map(({ thread, metrics }) =>
    labelled(
      metrics.filter((m) => !PROCESS_WIDE.test(m.name)),
      String(thread),
    ),
  );
  const perThread = new Set(fromThreads.flatMap((ms) => ms.map((m) => m.name)));
  const main = own.map((m) =>
    perThread.has(m.name) ? labelled([m], 'main')[0]! : { ...m, aggregator: 'sum' as const },
  );
  return AggregatorRegistry.aggregate([main, ...fromThreads]);
}

/** The main thread's registry, whose exposition is the process's: its own metrics and every thread's. */
export class ThreadsRegistry extends Registry {
  constructor(private readonly threadMetrics: () => Promise<{ thread: number; metrics: ThreadMetrics }[]>) {
    super();
  }

  override async metrics(): Promise<string> {
    const [own, threads] = await Promise.all([this.getMetricsAsJSON(), this.threadMetrics()]);
    return mergeMetrics(own, threads).metrics();
  }
}
