import {
  AckPolicy,
  jetstream,
  jetstreamManager,
  type ConsumerMessages,
  type JsMsg,
} from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import {
  ANALYSIS_STREAM_CONFIG,
  ensureStream,
  nanos,
  safeError,
  type BusClient,
  type Logger,
} from '@vab/bus';
import {
  ANALYSIS_CONSUMER,
  ANALYSIS_STREAM,
  AnalysisJob,
  AppError,
  Subjects,
  type CallAnalysis,
} from '@vab/contracts';
import type { CallAnalyst } from './call-analyst.js';

/** A job that failed this many times (a model that kept failing) is stored as `failed`. */
export const ANALYSIS_MAX_ATTEMPTS = 3;
/** How long the queue's setup waits for JetStream at start. */
const SETUP_TIMEOUT_MS = 30_000;
/** Waits before a failed job comes back: the provider may be down for a while. */
const RETRY_DELAYS_MS = [5_000, 30_000];

/**
 * The work queue as the sessions service makes it (CALL_ANALYSIS, WorkQueue retention), and its one durable
 * pull consumer shared by every playground instance: a job is handed to one instance at a time and comes back
 * when that instance dies before acknowledging it (`ack_wait`).
 */
export async function ensureAnalysisQueue(nc: NatsConnection, ackWaitMs: number): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await ensureStream(jsm, ANALYSIS_STREAM_CONFIG);
  await jsm.consumers
    .add(ANALYSIS_STREAM, {
      durable_name: ANALYSIS_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: nanos(ackWaitMs),
      // one more than the attempts: the last delivery stores the failure
      max_deliver: ANALYSIS_MAX_ATTEMPTS + 1,
      max_ack_pending: 1000,
    })
    .catch(async (err: unknown) => {
      // made already (another instance): kept as it is
      await jsm.consumers.info(ANALYSIS_STREAM, ANALYSIS_CONSUMER).catch(() => {
        throw err;
      });
    });
}

/**
 * Works the analysis queue (docs/decisions/0034-post-call-analysis.md): a few jobs at once per instance; each
 * result is stored on the call (at most once per job) and only then acknowledged, so an instance that dies
 * mid-analysis leaves its job to another. A call whose analysis cannot run (no key, a flow that no longer
 * compiles) or whose model kept failing gets a `failed` analysis rather than none.
 */
export class AnalysisWorker {
  private messages: ConsumerMessages | undefined;
  private done: Promise<void> | undefined;

  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      analyst: CallAnalyst;
      log: Logger;
      concurrency: number;
      ackWaitMs: number;
      busTimeoutMs: number;
    },
  ) {}

  async start(): Promise<void> {
    // a JetStream cluster that has just started answers "temporarily unavailable" or not at all for a while
    // (a 3-node cluster's first seconds timed this start out), as the events stream's setup waits for it
    const deadline = Date.now() + SETUP_TIMEOUT_MS;
    for (;;) {
      try {
        await ensureAnalysisQueue(this.deps.nc, this.deps.ackWaitMs);
        break;
      } catch (err) {
        if (Date.now() + 500 > deadline) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const consumer = await jetstream(this.deps.nc).consumers.get(ANALYSIS_STREAM, ANALYSIS_CONSUMER);
    this.messages = await consumer.consume({ max_messages: this.deps.concurrency });
    const messages = this.messages;
    this.done = (async () => {
      const inFlight = new Set<Promise<void>>();
      for await (const m of messages) {
        // a job whose ack or nak cannot be sent (the connection went) comes back after ack_wait
        const p = this.handle(m)
          .catch((err: unknown) =>
            this.deps.log.warn(
              { code: 'ANALYSIS_JOB_LEFT', err: safeError(err), seq: m.seq },
              'analysis job left',
            ),
          )
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
        if (inFlight.size >= this.deps.concurrency) await Promise.race(inFlight);
      }
      await Promise.all(inFlight);
    })();
  }

  /** Stops taking jobs; those in flight finish (or come back to another instance after `ack_wait`). */
  async stop(): Promise<void> {
    await this.messages?.close();
    await this.done?.catch(() => undefined);
  }

  private async handle(m: JsMsg): Promise<void> {
    const { log } = this.deps;
    const parsed = AnalysisJob.safeParse(safeJson(m.string()));
    if (!parsed.success) {
      log.warn({ code: 'ANALYSIS_JOB_UNREADABLE', seq: m.seq }, 'analysis job unreadable');
      m.term();
      return;
    }
    const job = parsed.data;
    const attempt = m.info.deliveryCount;
    let analysis: CallAnalysis | null;
    try {
      analysis = await this.deps.analyst.analyse(job);
    } catch (err) {
      const permanent =
        err instanceof AppError && err.code !== 'SERVICE_UNAVAILABLE' && err.code !== 'TIMEOUT';
      if (!permanent && attempt < ANALYSIS_MAX_ATTEMPTS) {
        log.warn(
          { code: 'ANALYSIS_RETRIED', err: safeError(err), ...job, attempt },
          'call analysis failed: retried',
        );
        m.nak(RETRY_DELAYS_MS[attempt - 1] ?? RETRY_DELAYS_MS.at(-1));
        return;
      }
      log.warn({ code: 'ANALYSIS_FAILED', err: safeError(err), ...job, attempt }, 'call analysis failed');
      analysis = {
        failed: {
          code: err instanceof AppError ? err.code : 'MODEL_FAILED',
          message: (err instanceof Error ? err.message : String(err)).slice(0, 2000),
        },
        at: Date.now(),
      };
    }
    if (analysis === null) {
      m.ack();
      return;
    }
    try {
      const { stored } = await this.deps.bus.request(
        Subjects.callsAnalysisStore,
        { ...job, analysis },
        { timeoutMs: this.deps.busTimeoutMs, requestId: `analysis-${job.jobId}` },
      );
      log.info({ ...job, stored }, 'call analysed');
      m.ack();
    } catch (err) {
      // not stored: the job comes back (a stored one answers stored: false the next time)
      log.warn({ code: 'ANALYSIS_NOT_STORED', err: safeError(err), ...job }, 'call analysis not stored');
      m.nak(1000);
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
