import { telemetry } from '@livekit/agents';
import type { Tracing } from '@vab/service-kit';

const traced = new WeakSet<object>();

/**
 * LiveKit Agents' own spans (a session, its turns, each model request with the GenAI conventions, tool
 * calls) go to this process's provider: the engine's instrumentation rather than ours around it. LiveKit
 * strips its content attributes (instructions, messages, transcripts, tool arguments and results) before
 * every exporter unless `allowPii`; that is the operator's one content opt-in here too. Once per provider.
 */
export function traceLiveKit(tracing: Tracing | undefined): void {
  const provider = tracing?.provider;
  if (!tracing?.enabled || !provider || traced.has(provider)) return;
  traced.add(provider);
  telemetry.setTracerProvider(provider, {
    registerSpanProcessor: (processor) => tracing.addSpanProcessor(processor),
    allowPii: tracing.captureContent,
  });
}
