import { llm } from '@livekit/agents';
import type { ModelUsage } from '@vab/contracts';

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

/**
 * A model used by a test case beside the flow (simulated caller, judge, case generator): each completion is
 * collected whole, bounded by `timeoutMs`, not retried (a failed attempt is reported, never hidden), and its
 * tokens counted for the run's usage by role.
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
