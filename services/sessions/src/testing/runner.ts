import type { NatsConnection } from '@nats-io/transport-node';
import { BusClient, safeError, type Logger } from '@vab/bus';
import {
  AppError,
  FlowIssue,
  latencyChanges,
  Subjects,
  type CaseResult,
  type CaseVerdict,
  type CreateTestRunBody,
  type TestCase,
} from '@vab/contracts';
import { z } from 'zod';
import { runLatency, type TestingStore } from './store.js';
import { sessionsMetrics } from '../metrics.js';
import { judge } from './verdict.js';

export interface RunnerSettings {
  /** Cases of one run in flight at once (TEST_RUN_CONCURRENCY). */
  concurrency: number;
  /** How long one case may take on a playground instance before it counts as lost (TEST_CASE_TIMEOUT_MS). */
  caseTimeoutMs: number;
  /** Starts per case: a case whose instance died or timed out is started again, up to this many times. */
  attempts: number;
  /** How often a driving instance says it is alive; a run unheard of for 3× this is swept. */
  heartbeatMs: number;
  /** How long a case that found every instance full waits before it asks again. */
  noInstanceRetryMs: number;
  /** Bound on asking the agents service what changed since the last passing run. */
  diffTimeoutMs: number;
}

/** One test run to drive: which agent and version, its cases, and the request's keys (in memory only). */
export interface RunOrder {
  agentId: string;
  runId: string;
  version: number;
  cases: TestCase[];
  apiKeys: CreateTestRunBody['apiKeys'];
}

/**
 * No playground instance took the case: every one is at capacity (they leave the queue group) or none is up.
 * A TIMEOUT is different: an instance took it and did not answer (it died, or the case ran too long), so it
 * counts as an attempt.
 */
const NO_INSTANCE = new Set(['SERVICE_UNAVAILABLE', 'CAPACITY_EXHAUSTED']);

/**
 * Drives test runs: each case is sent to the playground's queue group (`playground.cases.run`), so the bus
 * spreads cases over instances as it does sessions; up to `concurrency` at once per run. A case whose
 * instance dies (no answer within its timeout) is started again, then errored. The run's record is the
 * truth: if this instance dies, another one's sweep finds the run unheard of and errors what is left.
 */
export class TestRunner {
  private readonly bus: BusClient;
  private readonly driving = new Set<Promise<void>>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    nc: NatsConnection,
    private readonly store: TestingStore,
    private readonly settings: RunnerSettings,
    private readonly log: Logger,
  ) {
    this.bus = new BusClient(nc);
  }

  startSweeping(): void {
    this.sweeper = setInterval(() => void this.sweep(), this.settings.heartbeatMs);
    this.sweeper.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.sweeper);
  }

  /** Until when a run this instance drives counts as alive without a further heartbeat. */
  deadline(): number {
    return Date.now() + 3 * this.settings.heartbeatMs;
  }

  /** Resolves when every run this instance drives has finished (tests wait on it). */
  async idle(): Promise<void> {
    while (this.driving.size > 0) await Promise.all(this.driving);
  }

  run(order: RunOrder): void {
    const drive = this.drive(order).finally(() => this.driving.delete(drive));
    this.driving.add(drive);
  }

  private async drive(order: RunOrder): Promise<void> {
    const { agentId, runId, version, cases } = order;
    // alive for three heartbeats from each beat: a run unheard of for longer is swept
    const beatOnce = () => this.store.heartbeat(agentId, runId, this.deadline());
    const beat = setInterval(() => void beatOnce().catch(() => undefined), this.settings.heartbeatMs);
    beat.unref();
    await beatOnce().catch(() => undefined);
    try {
      const queue = [...cases];
      const verdicts: CaseVerdict[] = [];
      const worker = async () => {
        for (let c = queue.shift(); c; c = queue.shift()) {
          verdicts.push(await this.runCase(order, c));
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.settings.concurrency, cases.length) }, worker));
      await this.store.finishRun(agentId, runId, await this.comparedToLastPass(agentId, runId, version));
      // as runStatus adds them up
      const verdict = verdicts.includes('errored')
        ? 'errored'
        : verdicts.includes('failed')
          ? 'failed'
          : 'passed';
      sessionsMetrics().runs.inc({ verdict });
      this.log.info({ agentId, runId, cases: cases.length }, 'test run finished');
    } catch (err) {
      this.log.error({ agentId, runId, err: safeError(err) }, 'test run driver failed');
    } finally {
      clearInterval(beat);
    }
  }

  /** Runs one case to its verdict (stored, and returned). */
  private async runCase(order: RunOrder, c: TestCase): Promise<CaseVerdict> {
    const verdict = await this.runCaseOnce(order, c);
    sessionsMetrics().cases.inc({ verdict });
    return verdict;
  }

  private async runCaseOnce(order: RunOrder, c: TestCase): Promise<CaseVerdict> {
    const { agentId, runId, version, apiKeys } = order;
    const result: CaseResult = {
      caseId: c.id,
      name: c.name,
      verdict: 'running',
      attempts: 0,
      failures: [],
      observed: null,
      error: null,
    };
    const requestId = `${runId}/${c.id}`;
    // no instance free (all at capacity, or none up): the case waits, queued, without using an attempt
    const waitUntil = Date.now() + this.settings.caseTimeoutMs * this.settings.attempts;
    for (;;) {
      result.attempts++;
      await this.store.setCaseResult(agentId, runId, { ...result, verdict: 'running' });
      try {
        const observed = await this.bus.request(
          Subjects.testCaseRun,
          { agentId, version, runId, caseId: c.id, turns: c.turns, temperature: c.temperature, apiKeys },
          { timeoutMs: this.settings.caseTimeoutMs, requestId },
        );
        const failures = judge(c.expect, observed);
        const verdict = failures.length === 0 ? 'passed' : 'failed';
        await this.store.setCaseResult(agentId, runId, { ...result, verdict, failures, observed });
        return verdict;
      } catch (err) {
        const code = err instanceof AppError ? err.code : 'INTERNAL';
        const message = err instanceof AppError ? err.message : 'the case could not run';
        if (NO_INSTANCE.has(code) && Date.now() < waitUntil) {
          result.attempts--;
          await this.store.setCaseResult(agentId, runId, { ...result, verdict: 'queued' });
          await new Promise((r) => setTimeout(r, this.settings.noInstanceRetryMs));
          continue;
        }
        if (code === 'TIMEOUT' && result.attempts < this.settings.attempts) {
          this.log.warn(
            { code: 'TEST_CASE_RESTARTED', agentId, runId, caseId: c.id, attempt: result.attempts },
            'test case lost; started again',
          );
          continue;
        }
        await this.store.setCaseResult(agentId, runId, {
          ...result,
          verdict: 'errored',
          error: `${code}: ${message}${err instanceof AppError ? flowIssuesText(err.details) : ''}`,
        });
        return 'errored';
      }
    }
  }

  /**
   * Against the agent's newest passing run created before this one: how the latency changed, and for a run
   * that did not pass, the flow's changes from that run's version to this one (asked of the agents service;
   * left out if it cannot answer).
   */
  private async comparedToLastPass(agentId: string, runId: string, version: number) {
    const runs = (await this.store.listRuns(agentId)) ?? [];
    const self = runs.find((r) => r.id === runId);
    if (!self) return {};
    const passed = runs.find((r) => r.status === 'passed' && r.createdAt <= self.createdAt && r.id !== runId);
    if (!passed) return {};
    const latencyChange = {
      runId: passed.id,
      changes: latencyChanges(passed.latency, runLatency(self.cases)),
    };
    if (self.cases.every((c) => c.verdict === 'passed')) return { latencyChange };
    let changes = null;
    if (passed.version !== version) {
      changes = await this.bus
        .request(
          Subjects.agentsVersionsDiff,
          { id: agentId, a: passed.version, b: version, canvas: false },
          { timeoutMs: this.settings.diffTimeoutMs, requestId: runId },
        )
        .catch((err: unknown) => {
          this.log.warn(
            { code: 'TEST_RUN_DIFF_NOT_LOADED', agentId, runId, err: safeError(err) },
            'version diff for a failing run not loaded',
          );
          return null;
        });
    }
    return { latencyChange, sinceLastPass: { runId: passed.id, version: passed.version, changes } };
  }

  /** Errors what is left of runs whose driver has not been heard of for three heartbeats. */
  async sweep(): Promise<number> {
    let swept = 0;
    try {
      const stale = await this.store.staleRuns(Date.now());
      for (const [agentId, runId] of stale) {
        const run = await this.store.getRun(agentId, runId).catch(() => undefined);
        for (const c of run?.cases ?? []) {
          if (c.verdict === 'queued' || c.verdict === 'running') {
            await this.store.setCaseResult(agentId, runId, {
              ...c,
              verdict: 'errored',
              error: 'the instance running this test run stopped before the case finished',
            });
          }
        }
        await this.store.finishRun(agentId, runId);
        sessionsMetrics().runs.inc({ verdict: 'errored' });
        this.log.warn({ code: 'TEST_RUN_SWEPT', agentId, runId }, 'stale test run errored');
        swept++;
      }
    } catch (err) {
      this.log.warn({ code: 'TEST_RUN_SWEEP_FAILED', err: safeError(err) }, 'test run sweep failed');
    }
    return swept;
  }
}

/** The readiness issues a FLOW_INVALID carries, as text: "the flow cannot run" alone does not say what to fix. */
function flowIssuesText(details: unknown): string {
  const parsed = z.array(FlowIssue).safeParse(details);
  if (!parsed.success || parsed.data.length === 0) return '';
  const shown = parsed.data.slice(0, 5).map((i) => (i.nodeId ? `${i.nodeId}: ${i.message}` : i.message));
  const more = parsed.data.length > shown.length ? ` (+${parsed.data.length - shown.length} more)` : '';
  return ` (${shown.join('; ')})${more}`;
}
