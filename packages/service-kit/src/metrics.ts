import { observeBus } from '@vab/bus';
import { contract, ErrorCode } from '@vab/contracts';
import { observeRedisCommands } from '@vab/storage';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { z } from 'zod';
import { FastHistogram, type FastSeries } from './fast-histogram.js';

/**
 * Prometheus metrics of one process (prom-client; docs/architecture.md says why not the OpenTelemetry
 * exporter). One registry per process, like the bus observer it feeds: services started side by side in one
 * process (the tests) share it. Every label is bounded: a subject, route, method, command or outcome from a
 * fixed set — never an agent, session or instance id, and never a credential.
 */
export interface ProcessMetrics {
  registry: Registry;
  /** OpenTelemetry's `http.server.request.duration`, as its Prometheus exporter names it. */
  httpServerDuration: FastHistogram<'http_route' | 'http_request_method' | 'http_response_status_code'>;
  busClientDuration: FastHistogram<'subject' | 'outcome'>;
  busServerDuration: FastHistogram<'subject' | 'outcome'>;
  redisCommandDuration: FastHistogram<'command' | 'outcome'>;
}

/** OpenTelemetry's advice for HTTP server durations (seconds). */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
/** A bus request takes ~0.3 ms on one machine; a turn forwarded to a model, seconds. */
const BUS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

let made: ProcessMetrics | undefined;

/** The process's registry and the instruments every process shares (made on first use). */
export function processMetrics(): ProcessMetrics {
  if (made) return made;
  const registry = new Registry();
  const registers = [registry];
  made = {
    registry,
    httpServerDuration: new FastHistogram({
      name: 'http_server_request_duration_seconds',
      help: 'Duration of HTTP server requests (OpenTelemetry http.server.request.duration).',
      labelNames: ['http_route', 'http_request_method', 'http_response_status_code'],
      buckets: HTTP_BUCKETS,
      registers,
    }),
    busClientDuration: new FastHistogram({
      name: 'bus_client_request_duration_seconds',
      help: 'NATS requests this process sent, until their reply, by subject and outcome (ok or error code).',
      labelNames: ['subject', 'outcome'],
      buckets: BUS_BUCKETS,
      registers,
    }),
    busServerDuration: new FastHistogram({
      name: 'bus_server_request_duration_seconds',
      help: 'NATS requests this process handled, until its reply, by subject and outcome (ok or error code).',
      labelNames: ['subject', 'outcome'],
      buckets: BUS_BUCKETS,
      registers,
    }),
    redisCommandDuration: new FastHistogram({
      name: 'redis_command_duration_seconds',
      help: 'Redis commands this process sent, until their answer, by command name and outcome.',
      labelNames: ['command', 'outcome'],
      buckets: REDIS_BUCKETS,
      registers,
    }),
  };
  return made;
}

let instrumented = false;

/**
 * Turns this process's metrics on: process metrics (CPU, memory, event loop, GC), the bus's timings, and
 * those of every Redis client `createRedis` makes afterwards. Called once by a process's main, before it
 * connects; idempotent.
 */
export function instrumentProcess(): ProcessMetrics {
  const m = processMetrics();
  if (instrumented) return m;
  instrumented = true;
  collectDefaultMetrics({ register: m.registry });
  observeBus({ client: busTiming(m.busClientDuration), server: busTiming(m.busServerDuration) });
  // clients made from now on (createRedis) time their commands
  observeRedisCommands(redisTiming(m.redisCommandDuration));
  return m;
}

/** Bound for the caches below: past it a value is labelled afresh each time (still right, a little slower). */
const CACHED = 512;

/**
 * A bus timing: its series found through the subject and outcome as they come (the same strings every time:
 * two map lookups on hashes already made), the labels worked out once per pair. A per-session subject (its
 * key in it, unbounded) is never kept.
 */
function busTiming(h: FastHistogram<'subject' | 'outcome'>) {
  const bySubject = new Map<string, Map<string, FastSeries>>();
  return (subject: string, outcome: string, seconds: number): void => {
    let byOutcome = bySubject.get(subject);
    if (byOutcome === undefined) {
      const label = subjectLabel(subject);
      if (label !== subject || bySubject.size >= CACHED) {
        h.observe({ subject: label, outcome: outcomeLabel(outcome) }, seconds);
        return;
      }
      byOutcome = new Map();
      bySubject.set(subject, byOutcome);
    }
    let series = byOutcome.get(outcome);
    if (series === undefined) {
      series = h.series({ subject, outcome: outcomeLabel(outcome) });
      if (byOutcome.size < CACHED) byOutcome.set(outcome, series);
    }
    series.observe(seconds);
  };
}

/** A Redis command's timing, its series found by the command's name (the shape checked once per name). */
function redisTiming(h: FastHistogram<'command' | 'outcome'>) {
  const byCommand = new Map<string, { label: string; ok?: FastSeries; error?: FastSeries }>();
  return (command: string, ok: boolean, seconds: number): void => {
    let known = byCommand.get(command);
    if (known === undefined) {
      known = { label: commandLabel(command) };
      if (byCommand.size < CACHED) byCommand.set(command, known);
    }
    // each outcome's series made when first seen: no zero series for errors that never happened
    const series = ok
      ? (known.ok ??= h.series({ command: known.label, outcome: 'ok' }))
      : (known.error ??= h.series({ command: known.label, outcome: 'error' }));
    series.observe(seconds);
  };
}

const PER_SESSION_SUBJECTS: [RegExp, string][] = [
  [/^playground\.owner\.[^.]+\.turn$/, 'playground.owner.*.turn'],
  [/^playground\.owner\.[^.]+\.end$/, 'playground.owner.*.end'],
  [/^playground\.live\.[^.]+$/, 'playground.live.*'],
];

/** A subject as a label: a contract subject as it is; a per-session one with its key replaced by `*`. */
export function subjectLabel(subject: string): string {
  if (Object.hasOwn(contract, subject)) return subject;
  for (const [pattern, label] of PER_SESSION_SUBJECTS) if (pattern.test(subject)) return label;
  return 'other';
}

const ERROR_CODES = new Set<string>(ErrorCode.options);

/** `ok`, or one of the error codes of the contracts. */
export const outcomeLabel = (outcome: string): string =>
  outcome === 'ok' || ERROR_CODES.has(outcome) ? outcome : 'INTERNAL';

/** Redis command names are the server's, a bounded set; only the shape is checked. */
export const commandLabel = (command: string | undefined): string =>
  command && /^[a-z][a-z0-9_.|-]{0,30}$/i.test(command) ? command.toLowerCase() : 'other';

const HTTP_METHODS = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'OPTIONS',
  'CONNECT',
  'TRACE',
]);

/** OpenTelemetry's rule: a method outside the known set is `_OTHER` (the method is the client's to choose). */
export const methodLabel = (method: string): string => (HTTP_METHODS.has(method) ? method : '_OTHER');

/** Where a service serves /metrics, /healthz and /readyz (the gateway serves them on its own port). */
export const MetricsEnv = {
  /**
   * Unset: no such listener (a process opens no port it was not asked to); `0`: a port the system picks
   * (logged at start); else that port.
   */
  METRICS_PORT: z.preprocess(
    (v) => (v === '' ? undefined : v),
    z.coerce
      .number({ error: 'must be a port number (0–65535)' })
      .int({ error: 'must be a port number (0–65535)' })
      .min(0, { error: 'must be a port number (0–65535)' })
      .max(65535, { error: 'must be a port number (0–65535)' })
      .optional(),
  ),
  /** The address it listens on: loopback unless a scraper elsewhere must reach it (`0.0.0.0`). */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
};
export type MetricsConfig = z.output<z.ZodObject<typeof MetricsEnv>>;
