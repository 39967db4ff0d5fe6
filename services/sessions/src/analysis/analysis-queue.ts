import { jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { isJetStreamError, JetStreamApiCodes, JetStreamApiError } from '@vab/bus';
import { ANALYSIS_STREAM, ANALYSIS_SUBJECTS, analysisJobSubject, type AnalysisJob } from '@vab/contracts';
import { randomUUID } from 'node:crypto';

const nanos = (ms: number) => ms * 1_000_000;

/**
 * The work queue of call analyses (docs/decisions/0034-post-call-analysis.md): a JetStream stream with
 * WorkQueue retention (a job is gone once a worker acknowledges it), made here when missing with the same
 * settings the playground's worker makes it with. A job waits at most a week.
 */
export class AnalysisQueue {
  private ready: Promise<void> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private ensure(): Promise<void> {
    return (this.ready ??= (async () => {
      const jsm = await jetstreamManager(this.nc);
      try {
        await jsm.streams.info(ANALYSIS_STREAM);
      } catch (err) {
        if (!isJetStreamError(err, JetStreamApiCodes.StreamNotFound)) throw err;
        await jsm.streams
          .add({
            name: ANALYSIS_STREAM,
            subjects: [ANALYSIS_SUBJECTS],
            retention: RetentionPolicy.Workqueue,
            storage: StorageType.File,
            max_age: nanos(7 * 86_400_000),
            duplicate_window: nanos(120_000),
          })
          .catch((e: unknown) => {
            // another process made it meanwhile
            if (!(e instanceof JetStreamApiError)) throw e;
          });
      }
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
