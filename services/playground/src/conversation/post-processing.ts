import { safeError } from '@vab/bus';
import type { llm } from '@livekit/agents';
import type { SessionEventInput, WebhookMock } from '@vab/contracts';
import type { LlmConfig, PostStep } from '@vab/flow';
import type { Logger } from 'pino';
import { EgressRefused, type EgressFetch } from '../egress/client.js';
import { playgroundMetrics } from '../observability/metrics.js';
import { extractStructuredOutput, type Turn } from './decide.js';

export interface PostProcessingOptions {
  /** The egress-checked client: a webhook URL is a flow's, and may point anywhere. */
  fetch: EgressFetch;
  webhookTimeoutMs: number;
  llmTimeoutMs: number;
  log: Logger;
  /** The session's events: each step's outcome. */
  emit?(event: SessionEventInput): void;
  /** A test case's mocked webhooks, by node id: not called, answered with the mock's status. */
  webhookMocks?: Readonly<Record<string, WebhookMock>> | undefined;
}

/**
 * What runs after an end step: structured output extracted from the conversation, then each webhook POSTed
 * `{ conversation, structuredOutput? }`. A failure is logged and never breaks the session; a webhook whose
 * address the egress policy refuses is never called. Returns the structured output (a test run checks it).
 */
export async function runPostProcessing(
  steps: PostStep[],
  conversation: Turn[],
  modelFor: (cfg: LlmConfig | undefined) => llm.LLM,
  opts: PostProcessingOptions,
): Promise<Record<string, unknown> | undefined> {
  let structuredOutput: Record<string, unknown> | undefined;
  for (const s of steps) {
    if (s.kind === 'structured_output') {
      try {
        structuredOutput = await extractStructuredOutput(
          modelFor(s.llm),
          conversation,
          s.command,
          s.schemaFields,
          opts.llmTimeoutMs,
        );
        opts.log.info({ stepId: s.id, fields: Object.keys(structuredOutput) }, 'structured output extracted');
        opts.emit?.({
          type: 'post_processing',
          stepId: s.id,
          kind: 'structured_output',
          ok: true,
          output: structuredOutput,
        });
      } catch (err) {
        opts.log.warn(
          { code: 'STRUCTURED_OUTPUT_FAILED', stepId: s.id, err: safeError(err) },
          'structured output failed',
        );
        opts.emit?.({
          type: 'post_processing',
          stepId: s.id,
          kind: 'structured_output',
          ok: false,
          error: 'the model gave no valid structured output',
        });
      }
      continue;
    }
    const mock =
      opts.webhookMocks && Object.hasOwn(opts.webhookMocks, s.id) ? opts.webhookMocks[s.id] : undefined;
    if (mock) {
      opts.log.info({ stepId: s.id, status: mock.status }, 'webhook mocked');
      const ok = mock.status >= 200 && mock.status < 300;
      opts.emit?.({ type: 'post_processing', stepId: s.id, kind: 'webhook', ok, status: mock.status });
      continue;
    }
    const startedAt = performance.now();
    const took = (outcome: string) =>
      playgroundMetrics().webhookCalls.observe({ outcome }, (performance.now() - startedAt) / 1000);
    try {
      const res = await opts.fetch(s.url, {
        method: 'POST',
        headers: { ...s.headers, 'content-type': 'application/json' },
        body: JSON.stringify(
          structuredOutput === undefined ? { conversation } : { conversation, structuredOutput },
        ),
        signal: AbortSignal.timeout(opts.webhookTimeoutMs),
      });
      // the answer's body is not ours to read
      await res.body?.cancel().catch(() => undefined);
      took(res.ok ? 'ok' : 'http_error');
      opts.log.info({ stepId: s.id, status: res.status }, 'webhook delivered');
      opts.emit?.({
        type: 'post_processing',
        stepId: s.id,
        kind: 'webhook',
        ok: res.ok,
        status: res.status,
      });
    } catch (err) {
      const refused = (err as { cause?: unknown }).cause;
      took(refused instanceof EgressRefused ? 'refused' : 'failed');
      if (refused instanceof EgressRefused) {
        opts.log.warn(
          { code: 'WEBHOOK_REFUSED', stepId: s.id, host: refused.host, range: refused.range },
          'webhook refused',
        );
      } else {
        opts.log.warn({ code: 'WEBHOOK_FAILED', stepId: s.id, err: safeError(err) }, 'webhook failed');
      }
      // never the URL or the reason's details: the flow's URL may carry a secret in its query
      const error = refused instanceof EgressRefused ? 'refused by the egress policy' : 'not delivered';
      opts.emit?.({ type: 'post_processing', stepId: s.id, kind: 'webhook', ok: false, error });
    }
  }
  return structuredOutput;
}
