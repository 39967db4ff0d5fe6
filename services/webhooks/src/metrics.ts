import { processMetrics } from '@vab/service-kit';
import { Counter, Histogram } from 'prom-client';

function make() {
  const registers = [processMetrics().registry];
  return {
    attempts: new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts, by outcome (delivered, retry, failed, cancelled).',
      labelNames: ['outcome'],
      registers,
    }),
    failing: new Counter({
      name: 'webhook_endpoints_failing_total',
      help: 'Webhook endpoints reported failing (WEBHOOK_FAILING_AFTER failed attempts in a row).',
      registers,
    }),
    latency: new Histogram({
      name: 'webhook_delivery_latency_seconds',
      help: 'From an event to its first delivery attempt leaving, per delivery.',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
  };
}

let made: ReturnType<typeof make> | undefined;
/** The webhooks service's instruments, in the process's registry (made once: tests run several instances). */
export const webhooksMetrics = () => (made ??= make());
