import { llm } from '@livekit/agents';
import type { ModelUsage } from '@vab/contracts';
import type { z } from 'zod';

/** What one chat completion answered: its text, its tool calls (arguments as sent), and its tokens. */
export interface Answer {
  text: string;
  toolCalls: { name: string; args: string }[];
}

/** A model answered something other than what was asked for; `raw` is what it answered. */
export class ModelAnswerError extends Error {
  constructor(
    message: string,
    readonly raw: string | null,
  ) {
    super(message);
  }
}

/** The raw answer as a builder reads it: its text, then each tool call. */
export function rawOf(a: Answer): string {
  return [a.text, ...a.toolCalls.map((c) => `${c.name}(${c.args})`)].filter(Boolean).join('\n');
}

/** JSON text as a value; undefined when it is not JSON (a model's tool arguments are untrusted). */
export function safeJson(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return undefined;
  }
}

/**
 * A model used beside the flow's own turns — branch decisions, extraction, the simulated caller, judges, the
 * case generator. One retry policy for all of them: each completion is collected whole, bounded by
 * `timeoutMs` (LiveKit's own timeout set to the same bound), and never retried — LiveKit's default would
 * retry 3 times under its own timer; a failed call is reported to its caller (a branch decision's `error`,
 * an attempt's error with the raw answer), never hidden or stretched past its bound
 * (docs/decisions/0018-one-model-call.md). Its tokens are counted for a test run's usage by role.
 */
export class CaseModelClient {
  private readonly totals = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };

  constructor(
    private readonly model: llm.LLM,
    private readonly timeoutMs: number,
  ) {}

  async complete(
    messages: { role: 'system' | 'user' | 'assistant'; content: string }[],
    tools: llm.ToolContextLike,
    toolChoice: llm.ToolChoice,
  ): Promise<Answer> {
    const chatCtx = llm.ChatContext.empty();
    for (const m of messages) chatCtx.addMessage(m);
    const stream = this.model.chat({
      chatCtx,
      toolCtx: tools,
      toolChoice,
      connOptions: { maxRetry: 0, retryIntervalMs: 0, timeoutMs: this.timeoutMs },
    });
    let timedOut = false;
    const deadline = setTimeout(() => {
      timedOut = true;
      stream.close();
    }, this.timeoutMs);
    const answer: Answer = { text: '', toolCalls: [] };
    try {
      for await (const chunk of stream) {
        if (chunk.delta?.content) answer.text += chunk.delta.content;
        for (const c of chunk.delta?.toolCalls ?? []) answer.toolCalls.push({ name: c.name, args: c.args });
        if (chunk.usage) {
          this.totals.promptTokens += chunk.usage.promptTokens;
          this.totals.completionTokens += chunk.usage.completionTokens;
          this.totals.cachedTokens += chunk.usage.promptCachedTokens;
        }
      }
    } catch (err) {
      throw new ModelAnswerError(
        `the model call failed: ${err instanceof Error ? err.message : String(err)}`,
        null,
      );
    } finally {
      clearTimeout(deadline);
      stream.close();
    }
    if (timedOut)
      throw new ModelAnswerError(`the model did not answer within ${this.timeoutMs} ms`, rawOf(answer));
    return answer;
  }

  /** What this client's calls used so far (empty before the first). */
  usage(): ModelUsage[] {
    const t = this.totals;
    if (t.promptTokens + t.completionTokens === 0) return [];
    return [{ kind: 'llm', provider: this.model.provider, model: this.model.model, ...t }];
  }
}

/**
 * One forced tool call: the model must answer by calling `tool`; its arguments are parsed with the tool's
 * schema. Throws `ModelAnswerError` with the raw answer when it did not (`failure` names what was asked).
 */
export async function forcedToolCall<P extends z.ZodObject>(
  client: CaseModelClient,
  messages: { role: 'system' | 'user'; content: string }[],
  tool: { name: string; description: string; parameters: P; failure?: string },
): Promise<z.output<P>> {
  const tools = {
    [tool.name]: llm.tool({
      description: tool.description,
      parameters: tool.parameters,
      execute: async () => 'ok',
    }),
  };
  const answer = await client.complete(messages, tools, 'required');
  const call = answer.toolCalls.find((c) => c.name === tool.name);
  const parsed = call ? tool.parameters.safeParse(safeJson(call.args)) : undefined;
  if (!parsed?.success) {
    throw new ModelAnswerError(tool.failure ?? `the answer is not a valid ${tool.name}`, rawOf(answer));
  }
  return parsed.data;
}
