import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type TextMapGetter,
  type TextMapSetter,
} from '@opentelemetry/api';
import type { MsgHdrs } from '@nats-io/transport-node';

/**
 * W3C trace context across the bus. nats.js has no OpenTelemetry instrumentation, so it is done here, once:
 * the requesting side writes `traceparent`/`tracestate` into the NATS message headers (as HTTP would carry
 * them) and the serving side reads them back, with OpenTelemetry's own propagation API, so whichever
 * propagator the process configured is used. Spans follow the messaging conventions (`messaging.system` =
 * `nats`, destination = the subject); with no tracer provider they are non-recording and carry the
 * caller's context only, so the trace id of a request is logged on both sides with tracing off too.
 */

const tracer = trace.getTracer('@vab/bus');

const setter: TextMapSetter<MsgHdrs> = {
  set: (headers, key, value) => headers.set(key, value),
};

const getter: TextMapGetter<MsgHdrs | undefined> = {
  keys: (headers) => (headers ? headers.keys() : []),
  get: (headers, key) => headers?.get(key) || undefined,
};

/**
 * The client side of one request: a span, child of the active one, and its context in `headers`. Outside a
 * trace (a readiness probe, a timer's work) nothing: a bus request alone is not worth a trace of its own.
 */
export function startRequestSpan(subject: string, headers: MsgHdrs, bytes: number): Span | undefined {
  const active = context.active();
  if (trace.getSpanContext(active) === undefined) return undefined;
  const span = tracer.startSpan(`request ${subject}`, { kind: SpanKind.CLIENT }, active);
  if (span.isRecording()) {
    span.setAttributes({
      'messaging.system': 'nats',
      'messaging.destination.name': subject,
      'messaging.operation.name': 'request',
      'messaging.operation.type': 'send',
      'messaging.message.body.size': bytes,
    });
  }
  propagation.inject(trace.setSpan(active, span), headers, setter);
  return span;
}

/** Ends a span with the outcome: an error's code (ours, or the bus's) as `error.type`. */
export function endSpan(span: Span | undefined, errorCode?: string): void {
  if (span === undefined) return;
  if (errorCode !== undefined && span.isRecording()) {
    span.setAttribute('error.type', errorCode);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/**
 * The serving side: the caller's context from the message headers, a server span under it, and `run`
 * inside that context; the span ends with the error code `run` resolves to (none: ok). A request from
 * outside any trace (no valid `traceparent`) is run as it is: no span, no extra promise, and no async context
 * entered (which, once entered, costs every later promise something).
 */
export function serveInSpan(
  subject: string,
  headers: MsgHdrs | undefined,
  run: () => Promise<string | undefined>,
): Promise<string | undefined> {
  if (headers?.has('traceparent') !== true) return run();
  const parent: Context = propagation.extract(ROOT_CONTEXT, headers, getter);
  if (trace.getSpanContext(parent) === undefined) return run();
  const span = tracer.startSpan(`process ${subject}`, { kind: SpanKind.SERVER }, parent);
  if (span.isRecording()) {
    span.setAttributes({
      'messaging.system': 'nats',
      'messaging.destination.name': subject,
      'messaging.operation.name': 'process',
      'messaging.operation.type': 'process',
    });
  }
  return context.with(trace.setSpan(parent, span), run).then(
    (code) => {
      endSpan(span, code);
      return code;
    },
    (err: unknown) => {
      endSpan(span, 'INTERNAL');
      throw err;
    },
  );
}
