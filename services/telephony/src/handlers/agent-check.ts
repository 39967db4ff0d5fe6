import type { BusClient } from '@vab/bus';
import { AppError, Subjects } from '@vab/contracts';

/** Bound on asking the agents service whether an agent exists. */
const LOOKUP_TIMEOUT_MS = 2_000;

/** A number is connected only to an agent that exists and is not archived. */
export async function checkAgent(bus: BusClient, agentId: string, requestId: string): Promise<void> {
  const agent = await bus.request(
    Subjects.agentsLookup,
    { id: agentId },
    { timeoutMs: LOOKUP_TIMEOUT_MS, requestId },
  );
  if (!agent.exists) throw new AppError('NOT_FOUND', 'no agent with this agentId');
  if (agent.archived) throw new AppError('AGENT_ARCHIVED', 'this agent is archived: it answers no calls');
}
