import type { BusClient } from '@vab/bus';
import { AppError, Subjects, type Flow } from '@vab/contracts';

/**
 * The flow a session runs: a draft sent with the start, a stored version, or the agent's latest — the same
 * rule for a text and a voice session.
 */
export async function flowToRun(
  bus: BusClient,
  agentId: string,
  body: { flow?: Flow | null | undefined; version?: number | null | undefined },
  opts: { timeoutMs: number; requestId: string },
): Promise<{ flow: Flow; version: number | null }> {
  if (body.flow && body.version) {
    throw new AppError('VALIDATION_FAILED', 'send either a flow or a version, not both', {
      issues: [{ path: 'body.version', message: 'not with flow' }],
    });
  }
  if (body.flow) return { flow: body.flow, version: null };
  if (body.version) {
    const stored = await bus.request(
      Subjects.agentsVersionsGet,
      { id: agentId, version: body.version },
      opts,
    );
    return { flow: stored.flow, version: stored.version };
  }
  const agent = await bus.request(Subjects.agentsGet, { id: agentId }, opts);
  return { flow: agent.flow, version: agent.version };
}
