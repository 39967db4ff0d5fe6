import { context, propagation } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { TracingSettings } from './tracing-env.js';

let ready = false;

/**
 * W3C trace context in and out, and the async context that carries it, whether or not spans are recorded:
 * an incoming `traceparent` is honoured (and logged) with no exporter configured. Without a tracer provider
 * the API's spans are non-recording ones that carry the caller's context and cost next to nothing. Once per
 * process.
 */
export function startPropagation(propagators: TracingSettings['propagators'] = ['tracecontext']): void {
  if (ready) return;
  ready = true;
  const manager = new AsyncLocalStorageContextManager();
  manager.enable();
  context.setGlobalContextManager(manager);
  const list = propagators.map((p) =>
    p === 'baggage' ? new W3CBaggagePropagator() : new W3CTraceContextPropagator(),
  );
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: list }));
}
