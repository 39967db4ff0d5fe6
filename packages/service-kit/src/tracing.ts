import { diag, DiagLogLevel, trace, type Context, type Span as ApiSpan } from '@opentelemetry/api';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as IORedisInstrumentationModule from '@opentelemetry/instrumentation-ioredis';
import type * as UndiciInstrumentationModule from '@opentelemetry/instrumentation-undici';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkTraceNode from '@opentelemetry/sdk-trace-node';
import type {
  NodeTracerProvider,
  ReadableSpan,
  Sampler,
  Span,
  SpanProcessor,
} from '@opentelemetry/sdk-trace-node';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { startPropagation } from './propagation.js';
import { tracingSettingsOf, type TracingConfig, type TracingSettings } from './tracing-env.js';

export * from './tracing-env.js';
export * from './propagation.js';

/** What a service's process gets from `startTracing`: whether spans are recorded, and the provider if so. */
export interface Tracing {
  /** Spans are recorded and exported. Off, context still travels (a caller's trace id is logged). */
  readonly enabled: boolean;
  /** The operator's opt-in for content in spans (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT). */
  readonly captureContent: boolean;
  /** The provider (when enabled), e.g. for LiveKit Agents' `telemetry.setTracerProvider`. */
  readonly provider: NodeTracerProvider | undefined;
  /** Adds a span processor to the running provider (LiveKit registers its own: metadata, PII filter). */
  addSpanProcessor(processor: SpanProcessor): void;
  /** Exports what is pending and stops; part of the service's shutdown. */
  shutdown(): Promise<void>;
}

const OFF: Tracing = {
  enabled: false,
  captureContent: false,
  provider: undefined,
  addSpanProcessor: () => undefined,
  shutdown: async () => undefined,
};

let started: Tracing | undefined;

/**
 * The SDK, its exporters and instrumentations are loaded only when tracing is on: loaded and unused they were
 * ~10 MB more heap in every process, and a same-run A/B read the agents service's CPU per request 6–10 %
 * higher for that alone (docs/performance.md). They are CommonJS packages; `require` keeps start synchronous.
 */
const load = createRequire(import.meta.url);

/**
 * Starts OpenTelemetry for this process as the standard variables say (tracing-env.ts): the W3C propagator
 * and context always; with an OTLP endpoint also the tracer provider, the exporter (http/protobuf or
 * http/json), the sampler, the resource, and the ioredis and undici instrumentations. Once per process: a
 * second call (an in-process test stack) gets the first one's result.
 */
export function startTracing(service: string, config: TracingConfig, log?: Logger): Tracing {
  const settings = tracingSettingsOf(service, config);
  startPropagation(settings.propagators);
  if (started) return started;
  if (!settings.enabled) {
    started = OFF;
    return started;
  }
  const sdk = load('@opentelemetry/sdk-trace-node') as typeof SdkTraceNode;
  const { defaultResource, resourceFromAttributes } = load('@opentelemetry/resources') as typeof Resources;
  const { UndiciInstrumentation } = load(
    '@opentelemetry/instrumentation-undici',
  ) as typeof UndiciInstrumentationModule;
  // both exporters take the same options and export the same class shape
  const { OTLPTraceExporter: Exporter } = load(
    settings.protocol === 'http/json'
      ? '@opentelemetry/exporter-trace-otlp-http'
      : '@opentelemetry/exporter-trace-otlp-proto',
  ) as typeof OtlpHttp;
  const exporter = new Exporter({
    url: settings.url,
    headers: settings.headers,
    ...(settings.timeoutMs ? { timeoutMillis: settings.timeoutMs } : {}),
  });
  const fanout = new FanoutProcessor();
  const provider = new sdk.NodeTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        'service.instance.id': randomUUID(),
        ...settings.resourceAttributes,
        'service.name': settings.serviceName,
      }),
    ),
    sampler: samplerOf(sdk, settings),
    spanProcessors: [new RedactingProcessor(), fanout, new sdk.BatchSpanProcessor(exporter, settings.batch)],
  });
  trace.setGlobalTracerProvider(provider);
  instrumentRedis(provider);
  const undici = new UndiciInstrumentation({
    // an outgoing call is part of a request or a session turn, never a trace of its own
    requireParentforSpans: true,
    // a URL a flow names may carry a key in its query (Google's `?key=`): the span keeps the path only
    requestHook: (span) => redactUrlAttributes(span),
  });
  undici.setTracerProvider(provider);
  diag.setLogger(diagLoggerOf(log), { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  log?.info(
    {
      endpoint: redactUrl(settings.url),
      protocol: settings.protocol,
      sampler: settings.sampler,
      ratio: settings.samplerRatio,
      serviceName: settings.serviceName,
      captureContent: settings.captureContent,
    },
    'tracing on',
  );
  started = {
    enabled: true,
    captureContent: settings.captureContent,
    provider,
    addSpanProcessor: (p) => fanout.add(p),
    shutdown: async () => {
      undici.disable();
      await provider.shutdown().catch(() => undefined);
    },
  };
  return started;
}

function samplerOf(sdk: typeof SdkTraceNode, s: TracingSettings): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
  const ratio = new TraceIdRatioBasedSampler(s.samplerRatio);
  switch (s.sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return ratio;
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: ratio });
  }
}

/**
 * One span per Redis command or script, children of the request that sent them. The instrumentation's
 * own module patch is applied to the ioredis this process already loaded (every service imports it through
 * @vab/storage before its main runs): ioredis is CommonJS and patched on its prototype, so this works
 * whatever loaded it first and however the process was started (`node main.js`, a container, an in-process
 * test stack), without an ESM loader hook intercepting every import. `db.statement` is the command's name
 * only: a script's arguments are stored flows, which may hold credentials.
 */
function instrumentRedis(provider: NodeTracerProvider): void {
  const { IORedisInstrumentation } = load(
    '@opentelemetry/instrumentation-ioredis',
  ) as typeof IORedisInstrumentationModule;
  const instrumentation = new IORedisInstrumentation({
    enabled: false,
    requireParentSpan: true,
    dbStatementSerializer: (cmdName) => cmdName,
  });
  instrumentation.setTracerProvider(provider);
  const ioredis = load('ioredis') as unknown;
  const version = (load('ioredis/package.json') as { version: string }).version;
  for (const def of instrumentation.getModuleDefinitions()) {
    if (def.name === 'ioredis') def.patch?.(ioredis, version);
  }
}

/** Processors added after the provider was made (LiveKit Agents registers its own). */
class FanoutProcessor implements SpanProcessor {
  private readonly processors: SpanProcessor[] = [];
  add(p: SpanProcessor): void {
    this.processors.push(p);
  }
  onStart(span: Span, parent: Context): void {
    for (const p of this.processors) p.onStart(span, parent);
  }
  onEnding(span: Span): void {
    for (const p of this.processors) p.onEnding?.(span);
  }
  onEnd(span: ReadableSpan): void {
    for (const p of this.processors) p.onEnd(span);
  }
  async forceFlush(): Promise<void> {
    await Promise.all(this.processors.map((p) => p.forceFlush()));
  }
  async shutdown(): Promise<void> {
    await Promise.all(this.processors.map((p) => p.shutdown()));
  }
}

/** The attributes a URL may sit in, across the HTTP conventions old and new. */
const URL_ATTRIBUTES = ['url.full', 'http.url', 'url.query', 'http.target', 'url.path'];

/** A URL without what may carry a secret: its query (Google's `?key=`), fragment and user info. */
export function redactUrl(raw: string): string {
  try {
    const u = new URL(raw);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString();
  } catch {
    return raw.split(/[?#]/)[0]!;
  }
}

function redactUrlAttributes(span: ApiSpan | Span): void {
  const attrs = (span as Span).attributes as Record<string, unknown> | undefined;
  if (!attrs) return;
  for (const key of URL_ATTRIBUTES) {
    const value = attrs[key];
    if (typeof value !== 'string') continue;
    if (key === 'url.query') span.setAttribute(key, value === '' ? '' : '[redacted]');
    else if (/^https?:/i.test(value)) span.setAttribute(key, redactUrl(value));
    else span.setAttribute(key, value.split(/[?#]/)[0]!);
  }
}

/**
 * The last word on what a span may carry, whatever instrumentation made it: URLs lose their query and user
 * info. Runs in `onEnding`, before any exporter sees the span.
 */
class RedactingProcessor implements SpanProcessor {
  onStart(): void {}
  onEnding(span: Span): void {
    redactUrlAttributes(span);
  }
  onEnd(): void {}
  async forceFlush(): Promise<void> {}
  async shutdown(): Promise<void> {}
}

/** The SDK's own complaints (an export that failed) as warnings in the service's log, not on stderr. */
function diagLoggerOf(log: Logger | undefined) {
  const warn = (message: string) => log?.warn({ code: 'TRACING_EXPORT_PROBLEM', detail: message }, 'tracing');
  return {
    error: warn,
    warn,
    info: () => undefined,
    debug: () => undefined,
    verbose: () => undefined,
  };
}
