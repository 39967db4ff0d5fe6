import { processMetrics } from '@vab/service-kit';
import { Counter } from 'prom-client';

function make() {
  const registers = [processMetrics().registry];
  return {
    runs: new Counter({
      name: 'test_runs_total',
      help: 'Test runs finished, by verdict (passed, failed, errored).',
      labelNames: ['verdict'],
      registers,
    }),
    cases: new Counter({
      name: 'test_cases_total',
      help: 'Test cases finished, by verdict (passed, failed, errored).',
      labelNames: ['verdict'],
      registers,
    }),
  };
}

let made: ReturnType<typeof make> | undefined;
/** The sessions service's instruments, in the process's registry (made once: tests run several instances). */
export const sessionsMetrics = () => (made ??= make());
