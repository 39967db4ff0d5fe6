import { busClientOf, type BusClient } from '@vab/bus';
import { AppError, Subjects, type AgentLookup, type Flow } from '@vab/contracts';
import type { NatsConnection } from '@nats-io/transport-node';

/** What this service knows of agents: only what the agents service answers over the bus. */
export class AgentsDirectory {
  private readonly bus: BusClient;
  constructor(
    nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {
    this.bus = busClientOf(nc);
  }

  async lookup(id: string, requestId: string): Promise<AgentLookup> {
    return this.bus.request(Subjects.agentsLookup, { id }, { timeoutMs: this.timeoutMs, requestId });
  }

  /** 404 for an unknown agent; archived agents pass (their history stays readable). */
  async requireExisting(id: string, requestId: string): Promise<AgentLookup> {
    const found = await this.lookup(id, requestId);
    if (!found.exists) throw new AppError('NOT_FOUND', `agent ${id} not found`);
    return found;
  }

  /**
   * A list read from this service's storage: found items prove the agent exists; none may mean "no history
   * yet" (answer `empty`) or "no such agent" (404), which only the agents service can tell.
   */
  async listOrNotFound<T>(id: string, requestId: string, found: T | undefined, empty: T): Promise<T> {
    if (found !== undefined) return found;
    await this.requireExisting(id, requestId);
    return empty;
  }

  /** The agent's latest flow (what a new or edited test case is checked against). */
  async latestFlow(id: string, requestId: string): Promise<Flow> {
    const agent = await this.bus.request(
      Subjects.agentsGet,
      { id },
      { timeoutMs: this.timeoutMs, requestId },
    );
    return agent.flow;
  }

  /** 404 unless the agent still keeps `version` (versions past the latest never were; retention removes old ones). */
  async requireVersion(id: string, version: number, requestId: string): Promise<void> {
    const versions = await this.bus.request(
      Subjects.agentsVersionsList,
      { id },
      { timeoutMs: this.timeoutMs, requestId },
    );
    if (!versions.some((v) => v.version === version)) {
      throw new AppError('NOT_FOUND', `agent ${id} has no version ${version}`);
    }
  }

  /** For writes that start something new: the agent must exist and be active. */
  async requireActive(id: string, requestId: string): Promise<AgentLookup> {
    const found = await this.requireExisting(id, requestId);
    if (found.archived) throw new AppError('AGENT_ARCHIVED', `agent ${id} is archived`);
    return found;
  }
}
