import type { NatsConnection } from '@nats-io/transport-node';
import { busClientOf, safeError, type BusClient, type Logger } from '@vab/bus';
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
import { randomInt } from 'node:crypto';
import { sessionsMetrics } from '../metrics.js';
import { runLatency, type TestingStore } from './store.js';
import { attemptVerdict, caseVerdict } from './verdict.js';

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
  /** The run's fixed seed, when it was given one. */
  seed?: number | undefined;
  /** Who started the run (the gateway's caller): its attempts hold that caller's session slots. */
  caller?: string | undefined;
}

/**
 * The attempt cannot start yet, and waits without using a start: no playground instance took the case (every
 * one is at capacity, so they left the queue group, or none is up), or the run's caller holds all its session
 * slots (RATE_LIMITED: its own sessions and its runs' attempts share MAX_SESSIONS_PER_CALLER). A TIMEOUT is
 * different: an instance took it and did not answer (it died, or the case ran too long), so it counts as an
 * attempt.
 */
const NO_INSTANCE = new Set(['SERVICE_UNAVAILABLE', 'CAPACITY_EXHAUSTED', 'RATE_LIMITED']);

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
    this.bus = busClientOf(nc);
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
    const { agentId, runId, cases } = order;
    // alive for three heartbeats from each beat: a run unheard of for longer is swept
    const beatOnce = () => this.store.heartbeat(agentId, runId, this.deadline());
    const beat = setInterval(() => void beatOnce().catch(() => undefined), this.settings.heartbeatMs);
    beat.unref();
    await beatOnce().catch(() => undefined);
    try {
      // every repeat of every case is one unit of work: units spread over instances as cases always did
      const results = new Map(cases.map((c) => [c.id, queuedResult(c)]));
      const queue = cases.flatMap((c) => Array.from({ length: c.repeat }, (_, index) => ({ c, index })));
      const worker = async () => {
        for (let u = queue.shift(); u; u = queue.shift()) {
          await this.runAttempt(order, u.c, u.index, results.get(u.c.id)!);
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.settings.concurrency, queue.length) }, worker));
      await this.store.finishRun(
        agentId,
        runId,
        await this.comparedToLastPass(agentId, runId, order.version),
      );
      this.count([...results.values()].map((r) => r.verdict));
      this.log.info({ agentId, runId, cases: cases.length }, 'test run finished');
    } catch (err) {
      this.log.error({ agentId, runId, err: safeError(err) }, 'test run driver failed');
    } finally {
      clearInterval(beat);
    }
  }

  /** A finished run and its cases, by verdict, as the run's status adds them up. */
  private count(verdicts: CaseVerdict[]): void {
    const metrics = sessionsMetrics();
    for (const verdict of verdicts) metrics.cases.inc({ verdict });
    const run = verdicts.includes('errored') ? 'errored' : verdicts.includes('failed') ? 'failed' : 'passed';
    metrics.runs.inc({ verdict: run });
  }

  /**
   * One case's result, rewritten whole after each change of one of its attempts: this driver is the only
   * writer of its run's cases, and its writes reach Redis in order on one connection.
   */
  private async publish(order: RunOrder, result: CaseResult, minPassRate: number): Promise<void> {
    const { verdict, passRate } = caseVerdict(result.repeats, minPassRate);
    result.verdict = verdict;
    result.passRate = passRate;
    const shown =
      result.repeats.find((a) => a.verdict === 'failed' || a.verdict === 'errored') ??
      result.repeats.find((a) => a.observed !== null);
    result.failures = shown?.failures ?? [];
    result.observed = shown?.observed ?? null;
    result.error = verdict === 'errored' ? (shown?.error ?? null) : null;
    await this.store.setCaseResult(order.agentId, order.runId, result);
  }

  private async runAttempt(order: RunOrder, c: TestCase, index: number, result: CaseResult): Promise<void> {
    const { agentId, runId, version, apiKeys } = order;
    const attempt = result.repeats[index]!;
    const requestId = c.repeat > 1 ? `${runId}/${c.id}/${index}` : `${runId}/${c.id}`;
    // recorded on the attempt's observation (where the provider takes one): the same seed runs it again
    const seed = order.seed ?? randomInt(0, 2 ** 31 - 1);
    let starts = 0;
    // no instance free (all at capacity, or none up): the attempt waits, queued, without using a start
    const waitUntil = Date.now() + this.settings.caseTimeoutMs * this.settings.attempts;
    for (;;) {
      starts++;
      result.attempts++;
      attempt.verdict = 'running';
      await this.publish(order, result, c.minPassRate);
      try {
        const observed = await this.bus.request(
          Subjects.testCaseRun,
          {
            agentId,
            version,
            runId,
            caseId: c.id,
            turns: c.turns,
            temperature: c.temperature,
            apiKeys,
            simulation: c.simulation,
            mocks: c.mocks,
            criteria: c.criteria,
            judgeModel: c.judgeModel,
            expect: c.expect,
            attempt: index,
            seed,
          },
          { timeoutMs: this.settings.caseTimeoutMs, requestId, caller: order.caller },
        );
        Object.assign(attempt, attemptVerdict(c, observed), { observed });
        await this.publish(order, result, c.minPassRate);
        return;
      } catch (err) {
        const code = err instanceof AppError ? err.code : 'INTERNAL';
        const message = err instanceof AppError ? err.message : 'the case could not run';
        if (NO_INSTANCE.has(code) && Date.now() < waitUntil) {
          starts--;
          result.attempts--;
          attempt.verdict = 'queued';
          await this.publish(order, result, c.minPassRate);
          await new Promise((r) => setTimeout(r, this.settings.noInstanceRetryMs));
          continue;
        }
        if (code === 'TIMEOUT' && starts < this.settings.attempts) {
          this.log.warn(
            { code: 'TEST_CASE_RESTARTED', agentId, runId, caseId: c.id, repeat: index, attempt: starts },
            'test case lost; started again',
          );
          continue;
        }
        Object.assign(attempt, {
          verdict: 'errored',
          error: `${code}: ${message}${err instanceof AppError ? flowIssuesText(err.details) : ''}`,
        });
        await this.publish(order, result, c.minPassRate);
        return;
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
            const error = 'the instance running this test run stopped before the case finished';
            const repeats = c.repeats.map((a) =>
              a.verdict === 'queued' || a.verdict === 'running'
                ? { ...a, verdict: 'errored' as const, error }
                : a,
            );
            await this.store.setCaseResult(agentId, runId, {
              ...c,
              repeats,
              passRate: caseVerdict(repeats, c.minPassRate).passRate,
              verdict: 'errored',
              error,
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

/** A case's result before any of its repeats has started. */
export function queuedResult(c: TestCase): CaseResult {
  return {
    caseId: c.id,
    name: c.name,
    verdict: 'queued',
    attempts: 0,
    failures: [],
    observed: null,
    error: null,
    passRate: null,
    minPassRate: c.minPassRate,
    repeats: Array.from({ length: c.repeat }, (_, index) => ({
      index,
      verdict: 'queued' as const,
      failures: [],
      observed: null,
      error: null,
      raw: null,
    })),
  };
}

/** The readiness issues a FLOW_INVALID carries, as text: "the flow cannot run" alone does not say what to fix. */
function flowIssuesText(details: unknown): string {
  const parsed = z.array(FlowIssue).safeParse(details);
  if (!parsed.success || parsed.data.length === 0) return '';
  const shown = parsed.data.slice(0, 5).map((i) => (i.nodeId ? `${i.nodeId}: ${i.message}` : i.message));
  const more = parsed.data.length > shown.length ? ` (+${parsed.data.length - shown.length} more)` : '';
  return ` (${shown.join('; ')})${more}`;
}
