import type { TestingStore } from '../testing/store.js';

/**
 * Why the agent's deploy gate refuses `version`, or null when it lets it through (the gate off, or the newest
 * finished run on that version passed and ran every case the agent has). The pipeline and an external
 * deployer's PATCH ask the same question.
 */
export async function gateRefusal(
  testing: TestingStore,
  agentId: string,
  version: number,
): Promise<string | null> {
  if (!(await testing.gate(agentId))) return null;
  const runs = (await testing.listRuns(agentId)) ?? [];
  const last = runs.find((r) => r.version === version && r.finishedAt !== null);
  // a run of some cases only does not vouch for the others: it must have run every case the agent has
  const ran = new Set(last?.cases.map((c) => c.caseId));
  const notRun = (await testing.caseIds(agentId)).filter((id) => !ran.has(id));
  if (last?.status === 'passed' && notRun.length === 0) return null;
  return !last
    ? `no finished test run on version ${version}`
    : last.status !== 'passed'
      ? `test run ${last.id} on version ${version} ${last.status} (${last.counts.passed}/${last.counts.total} passed)`
      : `test run ${last.id} on version ${version} did not run ${notRun.length} of the agent's cases`;
}
