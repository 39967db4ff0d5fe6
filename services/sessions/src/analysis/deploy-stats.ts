import {
  USAGE_FIELDS,
  type CallSummary,
  type DeployRecord,
  type DeployStats,
  type FigureStats,
  type UsageTotals,
} from '@vab/contracts';
import type { CallsStore } from '../live/calls-store.js';

const round = (v: number, places = 1) => Math.round(v * 10 ** places) / 10 ** places;

/** Exact percentiles of the values (nearest rank), as a call's own figures are computed. */
function figureOf(values: number[]): FigureStats | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return {
    count: sorted.length,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    mean: round(sorted.reduce((a, b) => a + b, 0) / sorted.length),
    max: sorted.at(-1)!,
  };
}

/**
 * A deploy's figures from its calls (issue 47), read from the calls kept (a page of 100 at a time): the
 * counts, the minutes and ended reasons, the success rate of the analysed calls, the caller's response time
 * over every measured turn, and the usage summed per provider and model.
 */
export async function deployStats(calls: CallsStore, deploy: DeployRecord): Promise<DeployStats> {
  const endedReasons: DeployStats['endedReasons'] = {};
  const usage = new Map<string, UsageTotals>();
  const responseMs: number[] = [];
  let count = 0;
  let connected = 0;
  let durationMs = 0;
  let analysed = 0;
  let passed = 0;
  let failed = 0;
  const add = async (c: CallSummary) => {
    count++;
    if (c.endedReason) endedReasons[c.endedReason] = (endedReasons[c.endedReason] ?? 0) + 1;
    if (c.status !== 'ended' || c.endedReason === 'busy') return;
    connected++;
    durationMs += c.durationMs ?? 0;
    const success = c.analysis && 'success' in c.analysis ? c.analysis.success : null;
    if (success !== null) {
      analysed++;
      if (success) passed++;
      else failed++;
    }
    for (const u of c.usage) {
      const key = `${u.kind}|${u.provider}|${u.model}`;
      const t = usage.get(key) ?? {
        kind: u.kind,
        provider: u.provider,
        model: u.model,
        promptTokens: 0,
        completionTokens: 0,
        cachedTokens: 0,
        ttsCharacters: 0,
        sttAudioSeconds: 0,
      };
      for (const f of USAGE_FIELDS) t[f] += u[f] ?? 0;
      usage.set(key, t);
    }
    responseMs.push(...(await calls.responseTimes(c.agentId, c.id)));
  };
  let cursor: string | undefined;
  do {
    const page = await calls.list({
      agentId: deploy.agentId,
      deployId: deploy.id,
      limit: 100,
      ...(cursor ? { cursor } : {}),
    });
    for (const c of page.calls) await add(c);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return {
    agentId: deploy.agentId,
    deployId: deploy.id,
    deployNumber: deploy.deployNumber,
    version: deploy.version,
    calls: count,
    connected,
    minutes: round(durationMs / 60_000, 2),
    endedReasons,
    analysed,
    passed,
    failed,
    successRate: passed + failed > 0 ? round(passed / (passed + failed), 4) : null,
    responseMs: figureOf(responseMs),
    usage: [...usage.values()].map((u) => ({ ...u, sttAudioSeconds: round(u.sttAudioSeconds, 3) })),
  };
}
