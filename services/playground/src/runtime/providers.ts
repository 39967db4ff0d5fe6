import type { llm } from '@livekit/agents';
import * as openai from '@livekit/agents-plugin-openai';
import { AppError } from '@vab/contracts';
import type { CompiledFlow, LlmConfig } from '@vab/flow';

/** Provider keys by the identifier the builder uses in `apiKeys` and the variables that back them. */
export const PROVIDER_KEYS: Record<string, string[]> = {
  openai: ['OPENAI_API_KEY'],
  anthropic: ['ANTHROPIC_API_KEY'],
  groq: ['GROQ_API_KEY'],
  elevenlabs: ['ELEVEN_API_KEY', 'ELEVENLABS_API_KEY'],
  deepgram: ['DEEPGRAM_API_KEY'],
};

/** Keys from the request win; the server environment is the fallback. Values never leave this module's callers. */
export type KeyResolver = (provider: string) => string | undefined;

export function keyResolver(
  apiKeys: Record<string, string> | undefined,
  env: Record<string, string | undefined>,
): KeyResolver {
  return (provider) => {
    const fromRequest = apiKeys?.[provider];
    if (fromRequest && fromRequest.trim() !== '') return fromRequest;
    for (const name of PROVIDER_KEYS[provider] ?? []) {
      const v = env[name];
      if (v && v.trim() !== '') return v;
    }
    return undefined;
  };
}

/**
 * Language models this server can run in-process. Anthropic has no LiveKit Node plugin; its API speaks the
 * OpenAI chat-completions protocol, so it runs through the OpenAI plugin at Anthropic's base URL.
 */
const LLM_FACTORIES: Record<string, (cfg: LlmConfig, apiKey: string) => llm.LLM> = {
  openai: (cfg, apiKey) =>
    new openai.LLM({
      apiKey,
      model: cfg.model ?? 'gpt-4o-mini',
      baseURL: cfg.baseURL,
      temperature: cfg.temperature,
    }),
  anthropic: (cfg, apiKey) =>
    new openai.LLM({
      apiKey,
      model: cfg.model ?? 'claude-sonnet-4-5',
      baseURL: cfg.baseURL ?? 'https://api.anthropic.com/v1/',
      temperature: cfg.temperature,
    }),
  groq: (cfg, apiKey) =>
    openai.LLM.withGroq({
      apiKey,
      model: cfg.model ?? 'llama-3.3-70b-versatile',
      temperature: cfg.temperature,
    }),
};

/** Every language model a flow uses: the agent's, and the branch and structured-output nodes' own. */
export function llmConfigsOf(flow: CompiledFlow): LlmConfig[] {
  const out = [flow.providers.llm];
  for (const s of Object.values(flow.steps)) {
    if ((s.kind === 'ifelse' || s.kind === 'categorize') && s.llm) out.push(s.llm);
    if (s.kind === 'end')
      for (const p of s.post) if (p.kind === 'structured_output' && p.llm) out.push(p.llm);
  }
  return out;
}

/**
 * Refuses, before anything starts, a flow whose models this server cannot run (422) or whose keys are
 * missing (400, naming the providers only).
 */
export function checkTextRuntime(flow: CompiledFlow, keys: KeyResolver): void {
  const configs = llmConfigsOf(flow);
  const unsupported = [...new Set(configs.map((c) => c.provider).filter((p) => !LLM_FACTORIES[p]))];
  if (unsupported.length > 0) {
    throw new AppError(
      'FLOW_INVALID',
      `language model provider not supported by this server: ${unsupported.join(', ')}`,
      {
        details: unsupported.map((p) => ({
          code: 'PROVIDER_UNSUPPORTED',
          message: `${p} is not supported`,
          nodeId: configs.find((c) => c.provider === p)?.nodeId,
        })),
      },
    );
  }
  const missing = [...new Set(configs.map((c) => c.provider).filter((p) => !keys(p)))];
  if (missing.length > 0) {
    throw new AppError(
      'MISSING_CREDENTIALS',
      `missing API key for: ${missing.join(', ')} (send it in apiKeys or set it on the server)`,
    );
  }
}

export function createLlm(cfg: LlmConfig, keys: KeyResolver): llm.LLM {
  const factory = LLM_FACTORIES[cfg.provider];
  const key = keys(cfg.provider);
  if (!factory || !key) throw new AppError('MISSING_CREDENTIALS', `cannot create the ${cfg.provider} model`);
  return factory(cfg, key);
}
