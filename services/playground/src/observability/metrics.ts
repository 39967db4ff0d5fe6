import { METRIC_NAMES, type MetricName, type SessionType, type TurnMetrics } from '@vab/contracts';
import { processMetrics } from '@vab/service-kit';
import { Counter, Gauge, Histogram } from 'prom-client';
import { PROVIDERS } from '../models/providers.js';

/** What the session gauges read at scrape time: the admission of each playground instance in this process. */
export interface CapacityView {
  count(sessionType: SessionType): number;
  readonly capacity: number;
  readonly paused: boolean;
}

const SESSION_TYPES: readonly SessionType[] = ['voice', 'text', 'test'];

/** A turn figure's label: `llmTtftMs` → `llm_ttft`. */
export const figureLabel = (name: MetricName): string =>
  name
    .replace(/Ms$/, '')
    .replace(/([A-Z])/g, '_$1')
    .toLowerCase()
    .replace(/^e2e_latency$/, 'e2e');

/** Model calls take up to a minute; a webhook or tool call seconds. */
const CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];
/** A turn's figures: from tens of milliseconds (a tool) to tens of seconds (a long model answer). */
const FIGURE_BUCKETS = [0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30];

function make() {
  const registers = [processMetrics().registry];
  const instances = new Set<CapacityView>();
  const sum = (f: (h: CapacityView) => number) => [...instances].reduce((n, h) => n + f(h), 0);
  return {
    instances,
    active: new Gauge({
      name: 'playground_sessions_active',
      help: 'Sessions this instance holds now, by kind (voice, text, test).',
      labelNames: ['session_type'],
      registers,
      collect() {
        for (const t of SESSION_TYPES)
          this.set(
            { session_type: t },
            sum((h) => h.count(t)),
          );
      },
    }),
    capacity: new Gauge({
      name: 'playground_sessions_capacity',
      help: 'Sessions this instance may hold at once (MAX_SESSIONS).',
      registers,
      collect() {
        this.set(sum((h) => h.capacity));
      },
    }),
    paused: new Gauge({
      name: 'playground_paused',
      help: '1 while this instance is at capacity and has left the session-start queue groups.',
      registers,
      collect() {
        this.set(sum((h) => (h.paused ? 1 : 0)));
      },
    }),
    figures: new Histogram({
      name: 'playground_turn_figure_seconds',
      help: "A turn's figures (the ones its agent message carries), by figure and session kind.",
      labelNames: ['figure', 'session_type'],
      buckets: FIGURE_BUCKETS,
      registers,
    }),
    modelCalls: new Histogram({
      name: 'playground_model_call_duration_seconds',
      help: 'Model calls (LLM, TTS, STT) that completed, by kind and provider.',
      labelNames: ['kind', 'provider'],
      buckets: CALL_BUCKETS,
      registers,
    }),
    modelErrors: new Counter({
      name: 'playground_model_call_errors_total',
      help: 'Model calls that failed (as LiveKit reports them), by kind and provider.',
      labelNames: ['kind', 'provider'],
      registers,
    }),
    toolCalls: new Histogram({
      name: 'playground_tool_call_duration_seconds',
      help: "A flow's tool calls (MCP), by outcome.",
      labelNames: ['source', 'outcome'],
      buckets: CALL_BUCKETS,
      registers,
    }),
    webhookCalls: new Histogram({
      name: 'playground_webhook_call_duration_seconds',
      help: 'Webhook POSTs after an end step, by outcome (ok, http_error, refused, failed).',
      labelNames: ['outcome'],
      buckets: CALL_BUCKETS,
      registers,
    }),
  };
}

let made: ReturnType<typeof make> | undefined;
/** The playground's instruments, in the process's registry (made once: tests run several instances). */
export const playgroundMetrics = () => (made ??= make());

/** A turn's figures, each into its histogram (ms → s). */
export function observeTurn(sessionType: SessionType, metrics: TurnMetrics): void {
  const { figures } = playgroundMetrics();
  for (const name of METRIC_NAMES) {
    const ms = metrics[name];
    if (ms !== undefined)
      figures.observe({ figure: figureLabel(name), session_type: sessionType }, ms / 1000);
  }
}

const HOST_OF = new Map(
  Object.entries(PROVIDERS).map(([id, p]) => [new URL(p.defaultBaseURL).host, id] as const),
);

/**
 * A provider as a label: one of the provider table's ids, or `other`. LiveKit's OpenAI plugin names its
 * provider by its base URL's host, and a flow may point that anywhere (and a URL may carry a credential),
 * so nothing else passes.
 */
export function providerLabel(raw: string | undefined): string {
  if (!raw) return 'other';
  const v = raw.toLowerCase();
  if (Object.hasOwn(PROVIDERS, v)) return v;
  return HOST_OF.get(v) ?? 'other';
}

/** `llm_metrics` → `llm`; anything else LiveKit may add → `other`. */
export const modelKindLabel = (type: string | undefined): string => {
  const kind = type?.split('_')[0];
  return kind === 'llm' || kind === 'tts' || kind === 'stt' ? kind : 'other';
};
