import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, safeError, type BusClient, type Logger } from '@vab/bus';
import { Subjects } from '@vab/contracts';
import type { AgentStore } from './store.js';

/**
 * Keeps each agent's newest `keep` snapshots (MAX_VERSIONS_PER_AGENT) plus every version a deploy record
 * pins. Runs apart from the request that saved (a save never waits for it), one agent at a time; the
 * pinned versions are asked of the sessions service, and when it cannot answer nothing is removed (the
 * agent's next save tries again).
 */
export class VersionRetention {
  private readonly due = new Set<string>();
  private running: Promise<void> | undefined;
  private readonly bus: BusClient;

  constructor(
    nc: NatsConnection,
    private readonly store: AgentStore,
    private readonly keep: number,
    private readonly log: Logger,
    private readonly timeoutMs = 2000,
  ) {
    this.bus = busClientOf(nc);
  }

  /** The store's cue after a save: `stored` snapshots are kept for agent `id`. */
  readonly onSnapshots = (id: string, stored: number): void => {
    if (stored <= this.keep) return;
    this.due.add(id);
    this.running ??= this.drain().finally(() => (this.running = undefined));
  };

  /** Resolves once every agent queued so far has been pruned (tests and shutdown wait on it). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    for (const id of this.due) {
      this.due.delete(id);
      try {
        const { versions } = await this.bus.request(
          Subjects.deploysPinned,
          { agentId: id },
          { timeoutMs: this.timeoutMs, requestId: `retention-${id}` },
        );
        const removed = await this.store.prune(id, this.keep, versions);
        if (removed > 0) this.log.info({ agentId: id, removed, kept: this.keep }, 'old versions removed');
      } catch (err) {
        this.log.warn(
          {
            code: 'VERSION_RETENTION_SKIPPED',
            agentId: id,
            err: safeError(err),
          },
          'version retention skipped: pinned versions unknown',
        );
      }
    }
  }
}
