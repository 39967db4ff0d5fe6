import type { BusClient } from '@vab/bus';
import { Subjects, type CaseObservation, type Flow, type RunCaseRequest } from '@vab/contracts';
import type { SessionHost } from '../host/session-host.js';
import type { KeyEnv } from '../keys.js';
import type { ReadinessCheck } from '../readiness.js';
import type { TextTransport } from './text.js';

/** Nodes whose `temperature` a case's override sets: every model the flow names. */
const MODEL_NODE_TYPES = new Set(['llm']);

/** The flow with every model node's temperature set to `temperature` (a case's override). */
export function withTemperature(flow: Flow, temperature: number): Flow {
  return {
    ...flow,
    nodes: flow.nodes.map((n) => (MODEL_NODE_TYPES.has(String(n.nodeType)) ? { ...n, temperature } : n)),
  };
}

/**
 * One regression test case, run here from start to end: a text conversation on the stored version's flow,
 * recorded as a test session of type "test", its user turns typed in order. Answers what happened (the step
 * path, the replies, where it ended, the structured output); the sessions service judges it.
 */
export class TestCaseTransport {
  constructor(
    private readonly deps: {
      host: SessionHost;
      bus: BusClient;
      readiness: ReadinessCheck;
      text: TextTransport;
      env(): Promise<KeyEnv>;
      busTimeoutMs: number;
    },
  ) {}

  async run(req: RunCaseRequest, requestId: string): Promise<CaseObservation> {
    const { host, bus, readiness, text } = this.deps;
    const stored = await bus.request(
      Subjects.agentsVersionsGet,
      { id: req.agentId, version: req.version },
      { timeoutMs: this.deps.busTimeoutMs, requestId },
    );
    const flow = req.temperature === null ? stored.flow : withTemperature(stored.flow, req.temperature);
    const runnable = readiness.require(flow, 'test', await this.deps.env(), req.apiKeys);
    const { key, result, conversation } = await text.open(req.agentId, runnable, {
      sessionType: 'test',
      version: req.version,
      apiKeys: req.apiKeys,
      failure: 'the test case could not start',
      requestId,
    });
    const steps = [result.stepId];
    const replies = [result.replies];
    const metrics = result.metrics ? [result.metrics] : [];
    let last = { ended: result.ended, stepId: result.stepId };
    try {
      for (const said of req.turns) {
        if (last.ended) break;
        const turn = await host.turn(key, req.agentId, said, requestId);
        steps.push(...turn.stepChanges.map((c) => c.stepId));
        replies.push(turn.replies);
        if (turn.metrics) metrics.push(turn.metrics);
        last = turn;
      }
      const structured = last.ended ? await conversation.structuredOutput() : null;
      return {
        sessionId: key,
        steps,
        replies,
        ended: last.ended,
        endedAt: last.ended ? last.stepId : null,
        structured,
        metrics,
      };
    } finally {
      await host.end(key, req.agentId, requestId);
    }
  }
}
