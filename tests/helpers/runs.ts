import { vi } from 'vitest';
import type { api } from './stack.js';

/** A test run once it has finished (polled through the API, bounded). */
export function finishedRun(
  http: ReturnType<typeof api>,
  agentId: string,
  runId: string,
  timeoutMs = 20_000,
) {
  return vi.waitFor(
    async () => {
      const run = (await http.get(`/api/agents/${agentId}/test-runs/${runId}`)).body;
      if (run.finishedAt === null) throw new Error(`test run ${runId} did not finish`);
      return run;
    },
    { timeout: timeoutMs, interval: 100 },
  );
}
