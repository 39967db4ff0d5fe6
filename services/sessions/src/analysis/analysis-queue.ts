import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ANALYSIS_STREAM_CONFIG, ensureStream } from '@vab/bus';
import { analysisJobSubject, type AnalysisJob } from '@vab/contracts';
import { randomUUID } from 'node:crypto';

/**
 * The work queue of call analyses (docs/decisions/0034-post-call-analysis.md): a JetStream stream with
 * WorkQueue retention, made here when missing with the settings the playground's worker makes it with
 * (`ANALYSIS_STREAM_CONFIG`, declared once in @vab/bus).
 */
export class AnalysisQueue {
  private ready: Promise<void> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private ensure(): Promise<void> {
    return (this.ready ??= (async () => {
      await ensureStream(await jetstreamManager(this.nc), ANALYSIS_STREAM_CONFIG);
    })().catch((err: unknown) => {
      this.ready = undefined;
      throw err;
    }));
  }

  /** Queues one analysis of the call; its job id (the message id: a retried publish is stored once). */
  async enqueue(agentId: string, callId: string): Promise<AnalysisJob> {
    await this.ensure();
    const job: AnalysisJob = { agentId, callId, jobId: randomUUID(), requestedAt: Date.now() };
    await jetstream(this.nc).publish(analysisJobSubject(agentId), JSON.stringify(job), { msgID: job.jobId });
    return job;
  }
}
