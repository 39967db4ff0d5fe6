import { z } from 'zod';

/**
 * The standard OpenTelemetry variables a service process reads (the OTel SDK specification's names), checked
 * with the rest of its configuration so a bad one stops the process at start, named. Tracing is off unless
 * an OTLP endpoint is set. Kept apart from tracing.ts so a config module does not load the SDK.
 */

const bool = () =>
  z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .optional()
    .transform((v) => v === 'true');

const otlpUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
  .optional()
  .transform((v) => v);

const Protocol = z
  .enum(['http/protobuf', 'http/json'], {
    error: 'must be http/protobuf or http/json (grpc is not supported)',
  })
  .optional();

/** `key=value,key=value`, values percent-encoded (the W3C baggage format the spec uses for these lists). */
const keyValueList = z
  .string()
  .optional()
  .transform((text, ctx) => {
    const out: Record<string, string> = {};
    for (const part of (text ?? '').split(',')) {
      if (part.trim() === '') continue;
      const eq = part.indexOf('=');
      const key = eq > 0 ? part.slice(0, eq).trim() : '';
      if (!key) {
        ctx.addIssue({ code: 'custom', message: 'must be a list of key=value pairs, comma-separated' });
        return z.NEVER;
      }
      try {
        out[key] = decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        ctx.addIssue({ code: 'custom', message: `has a badly percent-encoded value for ${key}` });
        return z.NEVER;
      }
    }
    return out;
  });

const positiveInt = z.coerce.number({ error: 'must be a whole number' }).int().min(1).optional();

export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;

/** An empty variable counts as unset, as the OTel SDKs read them (compose files pass `VAR=` through). */
const blankIsUnset = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() === '' ? undefined : v), schema);

const TracingShape = {
  /** `true` turns the SDK off whatever else is set. */
  OTEL_SDK_DISABLED: bool(),
  /** The collector's base URL; traces go to `<it>/v1/traces`. Unset (and no traces endpoint): no tracing. */
  OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl,
  /** The full URL traces are posted to; wins over OTEL_EXPORTER_OTLP_ENDPOINT. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: otlpUrl,
  OTEL_EXPORTER_OTLP_PROTOCOL: Protocol,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: Protocol,
  /** Headers sent with every export (e.g. a collector's API key): never logged, never in a span. */
  OTEL_EXPORTER_OTLP_HEADERS: keyValueList,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: keyValueList,
  /** Bound on one export, in milliseconds (the spec's name, without our `_MS`). */
  OTEL_EXPORTER_OTLP_TIMEOUT: positiveInt,
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: positiveInt,
  /** `otlp` (default) or `none`. */
  OTEL_TRACES_EXPORTER: z
    .enum(['otlp', 'none'], { error: 'must be otlp or none (no other exporter is built in)' })
    .default('otlp'),
  OTEL_TRACES_SAMPLER: z
    .enum(SAMPLERS, { error: `must be one of ${SAMPLERS.join(', ')}` })
    .default('parentbased_always_on'),
  /** The ratio of the `*traceidratio` samplers, 0 to 1. */
  OTEL_TRACES_SAMPLER_ARG: z.coerce
    .number({ error: 'must be a number from 0 to 1' })
    .min(0, 'must be a number from 0 to 1')
    .max(1, 'must be a number from 0 to 1')
    .optional(),
  /** Wins over `service.name` in OTEL_RESOURCE_ATTRIBUTES; default: the service's own name. */
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
  OTEL_RESOURCE_ATTRIBUTES: keyValueList,
  /** Which context formats are read and written: W3C `tracecontext` and `baggage` only. */
  OTEL_PROPAGATORS: z
    .string()
    .optional()
    .refine(
      (v) =>
        v === undefined ||
        v
          .split(',')
          .map((s) => s.trim())
          .every((s) => s === 'tracecontext' || s === 'baggage' || s === 'none'),
      'must list tracecontext, baggage or none (no other propagator is built in)',
    ),
  OTEL_BSP_SCHEDULE_DELAY: positiveInt,
  OTEL_BSP_MAX_QUEUE_SIZE: positiveInt,
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: positiveInt,
  OTEL_BSP_EXPORT_TIMEOUT: positiveInt,
  /**
   * The one opt-in for content in spans: prompts, completions, transcripts, tool arguments and results.
   * The name OpenTelemetry's GenAI instrumentations read. Off: spans carry names, sizes, timings, models
   * and token counts only.
   */
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: bool(),
};

export const TracingEnv = Object.fromEntries(
  Object.entries(TracingShape).map(([name, schema]) => [name, blankIsUnset(schema)]),
) as { [K in keyof typeof TracingShape]: z.ZodPipe<z.ZodTransform, (typeof TracingShape)[K]> };

export type TracingConfig = z.output<z.ZodObject<typeof TracingShape>>;

/** What the SDK is started with, resolved from the variables above. */
export interface TracingSettings {
  /** Whether spans are recorded and exported (context is propagated either way). */
  enabled: boolean;
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  timeoutMs: number | undefined;
  sampler: (typeof SAMPLERS)[number];
  samplerRatio: number;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  propagators: ('tracecontext' | 'baggage')[];
  batch: {
    scheduledDelayMillis?: number;
    maxQueueSize?: number;
    maxExportBatchSize?: number;
    exportTimeoutMillis?: number;
  };
  captureContent: boolean;
}

export function tracingSettingsOf(service: string, c: TracingConfig): TracingSettings {
  const url =
    c.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
    (c.OTEL_EXPORTER_OTLP_ENDPOINT && `${c.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`);
  const propagators = (c.OTEL_PROPAGATORS ?? 'tracecontext,baggage')
    .split(',')
    .map((s) => s.trim())
    .filter((s): s is 'tracecontext' | 'baggage' => s === 'tracecontext' || s === 'baggage');
  const batch: TracingSettings['batch'] = {};
  if (c.OTEL_BSP_SCHEDULE_DELAY) batch.scheduledDelayMillis = c.OTEL_BSP_SCHEDULE_DELAY;
  if (c.OTEL_BSP_MAX_QUEUE_SIZE) batch.maxQueueSize = c.OTEL_BSP_MAX_QUEUE_SIZE;
  if (c.OTEL_BSP_MAX_EXPORT_BATCH_SIZE) batch.maxExportBatchSize = c.OTEL_BSP_MAX_EXPORT_BATCH_SIZE;
  if (c.OTEL_BSP_EXPORT_TIMEOUT) batch.exportTimeoutMillis = c.OTEL_BSP_EXPORT_TIMEOUT;
  return {
    enabled: !c.OTEL_SDK_DISABLED && c.OTEL_TRACES_EXPORTER === 'otlp' && url !== undefined,
    url: url ?? '',
    protocol: c.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? c.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    headers: { ...c.OTEL_EXPORTER_OTLP_HEADERS, ...c.OTEL_EXPORTER_OTLP_TRACES_HEADERS },
    timeoutMs: c.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? c.OTEL_EXPORTER_OTLP_TIMEOUT,
    sampler: c.OTEL_TRACES_SAMPLER,
    samplerRatio: c.OTEL_TRACES_SAMPLER_ARG ?? 1,
    serviceName: c.OTEL_SERVICE_NAME ?? c.OTEL_RESOURCE_ATTRIBUTES['service.name'] ?? service,
    resourceAttributes: c.OTEL_RESOURCE_ATTRIBUTES,
    propagators,
    batch,
    captureContent: c.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
  };
}
