import {
  AppError,
  type ApiKeys,
  type CallerEar,
  type CallerVoice,
  type CaseModel,
  type Flow,
  type FlowIssue,
  type FlowValidation,
  type ProviderRequirement,
  type SessionType,
} from '@vab/contracts';
import { isIP } from 'node:net';
import { compile, isBranch, modelOf, urlsOf, type CompiledFlow, type LlmConfig } from '@vab/flow';
import type { EgressFetch } from '../egress/client.js';
import type { EgressPolicy } from '../egress/policy.js';
import type { KeyEnv, KeyRule } from './provider-keys.js';
import { providerSpec, providersFor, type Endpoint, type Modality } from './providers.js';

/** One model the flow would run: which provider, in which role, for which node, at which base URL. */
interface ModelUse {
  provider: string;
  modality: Modality;
  nodeId: string;
  baseURL?: string | undefined;
  /** A model beside the flow: the setting that chose it, as a missing key's message names it. */
  setting?: string;
}

/**
 * A model a test case runs beside its flow: how issues name it (`caller voice`), and the request's setting
 * that chooses it (`simulation.voice.tts`), which a missing key's message names: the flow's own models may all
 * run keyless at a URL of the flow's while the one beside it needs a key.
 */
export interface BesideModel {
  role: string;
  setting: string;
}

/** What a missing key's message says needs it: the setting, or the flow's node standing in for it. */
function settingOf(who: BesideModel, chosen: boolean, nodeId: string): string {
  return chosen
    ? `${who.setting}, the ${who.role}`
    : `the flow's node ${nodeId}, the ${who.role} (${who.setting} is not set)`;
}

export interface Readiness {
  sessionType: SessionType;
  issues: FlowIssue[];
  /** The compiled flow, when it compiles (issues of the server's own may still stand). */
  config: CompiledFlow | undefined;
  requirements: ProviderRequirement[];
}

/** A flow that passed the check: compiled, and each model's endpoint and key resolved. */
export interface CheckedFlow {
  config: CompiledFlow;
  sessionType: SessionType;
  /** Each model use's endpoint and key, by `endpointKey` (a provider at a base URL). */
  endpoints: ReadonlyMap<string, Endpoint>;
}

/** A model beside the flow (a test case's simulator, judge or generator) that passed the check. */
export interface CheckedModel {
  cfg: LlmConfig;
  endpoint: Endpoint;
}

/** The simulated caller's voice or ear that passed the check: the node it would be, and its endpoint. */
export interface CheckedSpeech {
  /** The chosen speech model's fields (provider, model, voice or language, base URL), or the flow's own. */
  picked: Record<string, unknown>;
  provider: string;
  baseURL: string | undefined;
  modelName: string;
  endpoint: Endpoint;
}

/** Which endpoint a model use has: one per provider and base URL. */
export const endpointKey = (u: { provider: string; baseURL?: string | undefined }) =>
  `${u.provider} ${u.baseURL ?? ''}`;

/** Every model a compiled flow runs for a session of this kind. */
function modelUses(config: CompiledFlow, sessionType: SessionType): ModelUse[] {
  const llmUse = (c: LlmConfig): ModelUse => ({
    provider: c.provider,
    modality: 'llm',
    nodeId: c.nodeId,
    baseURL: c.baseURL,
  });
  const uses = [llmUse(config.providers.llm)];
  for (const s of Object.values(config.steps)) {
    if (isBranch(s) && s.llm) uses.push(llmUse(s.llm));
    if (s.kind === 'end') {
      for (const p of s.post) if (p.kind === 'structured_output' && p.llm) uses.push(llmUse(p.llm));
    }
  }
  if (sessionType === 'voice') {
    const { tts: t, stt: s } = config.providers;
    uses.push({ provider: t.provider, modality: 'tts', nodeId: t.nodeId, baseURL: t.baseURL });
    uses.push({ provider: s.provider, modality: 'stt', nodeId: s.nodeId, baseURL: s.baseURL });
  }
  return uses;
}

/**
 * The one answer to "can this flow run here, and what does it need". It only checks: the models of a flow
 * that passes are made by the model factory (`model-factory.ts`). Validate, the voice start and the text
 * start all ask it, so a flow that validate accepts starts (given its keys) and one it rejects never does:
 * the flow must compile; every model must be one this server runs for the session's kind (voice: LLM, TTS
 * and STT; text: the LLMs); every URL the flow names must be one the egress policy allows; and every model
 * needs a key the key rule lets it use.
 */
export class ReadinessCheck {
  constructor(
    private readonly deps: {
      policy: EgressPolicy;
      keys: KeyRule;
      egressFetch: EgressFetch;
      /** Bound on a model request to a base URL a flow named. */
      egressTimeoutMs: number;
    },
  ) {}

  assess(flow: Flow, sessionType: SessionType, env: KeyEnv): Readiness {
    const compiled = compile(flow);
    const issues = [...(compiled.ok ? [] : compiled.issues), ...this.nodeIssues(flow, sessionType)];
    const config = compiled.ok ? compiled.config : undefined;
    const requirements = config ? this.requirements(modelUses(config, sessionType), env) : [];
    return { sessionType, issues, config: issues.length === 0 ? config : undefined, requirements };
  }

  validate(flow: Flow, sessionType: SessionType, env: KeyEnv): FlowValidation {
    const r = this.assess(flow, sessionType, env);
    return { valid: r.issues.length === 0, sessionType, issues: r.issues, requirements: r.requirements };
  }

  /** A flow that can start now with these keys, or the error a client gets (422 before 400). */
  check(flow: Flow, sessionType: SessionType, env: KeyEnv, apiKeys: ApiKeys | null | undefined): CheckedFlow {
    const { issues, config } = this.assess(flow, sessionType, env);
    if (!config) throw new AppError('FLOW_INVALID', 'the flow cannot run', { details: issues });
    const endpoints = this.endpoints(modelUses(config, sessionType), env, apiKeys);
    return { config, sessionType, endpoints };
  }

  /**
   * A model a test case runs beside its flow (the simulated caller, a judge, the case generator), checked as
   * a flow's model node would be — a provider this server runs for text, a base URL the provider allows and
   * the egress policy lets through, a key the key rule lets go there. `role` names it in issues. Without
   * `choice`: the flow's own agent model.
   */
  checkModel(
    who: BesideModel,
    choice: CaseModel | null | undefined,
    fallback: LlmConfig,
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
  ): CheckedModel {
    const { role } = who;
    const cfg: LlmConfig = choice
      ? {
          nodeId: role,
          provider: choice.provider,
          model: choice.model,
          baseURL: choice.baseURL,
          temperature: choice.temperature,
        }
      : { ...fallback, nodeId: role };
    const node = { id: role, nodeType: 'llm', ...cfg };
    const issues = this.nodeIssues({ nodes: [node], edges: [] }, 'text');
    if (issues.length > 0) {
      throw new AppError('FLOW_INVALID', `the ${role} model cannot run`, { details: issues });
    }
    const use: ModelUse = {
      provider: cfg.provider,
      modality: 'llm',
      nodeId: role,
      baseURL: cfg.baseURL,
      setting: settingOf(who, Boolean(choice), fallback.nodeId),
    };
    return { cfg, endpoint: this.endpoints([use], env, apiKeys).get(endpointKey(use))! };
  }

  /**
   * The simulated caller's voice (`tts`) or ear (`stt`) of a voice test case, checked exactly as a flow's
   * `tts` / `stt` node would be — a provider this server runs for it, a base URL the provider allows and the
   * egress policy lets through, a key the key rule lets go there. Without `choice`: the flow's own.
   */
  checkSpeech(
    who: BesideModel,
    modality: 'tts' | 'stt',
    choice: (CallerVoice & CallerEar) | CallerVoice | CallerEar | undefined,
    flow: CompiledFlow,
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
  ): CheckedSpeech {
    const { role } = who;
    const own = flow.providers[modality];
    const picked: Record<string, unknown> = choice ? { ...choice } : { ...own };
    delete picked.nodeId;
    delete picked.extras;
    const node = { id: role, nodeType: modality, ...picked };
    const issues = this.nodeIssues({ nodes: [node], edges: [] }, 'voice');
    if (issues.length > 0) {
      throw new AppError('FLOW_INVALID', `the ${role} cannot run`, { details: issues });
    }
    const provider = String(picked.provider);
    const baseURL = picked.baseURL as string | undefined;
    const use: ModelUse = {
      provider,
      modality,
      nodeId: role,
      baseURL,
      setting: settingOf(who, Boolean(choice), own.nodeId),
    };
    const endpoint = this.endpoints([use], env, apiKeys).get(endpointKey(use))!;
    const modelName = (picked.model as string | undefined) ?? 'default';
    return { picked, provider, baseURL, modelName, endpoint };
  }

  /** Each model use's endpoint and key, or MISSING_CREDENTIALS naming every one without a key it may use. */
  private endpoints(
    uses: ModelUse[],
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
  ): Map<string, Endpoint> {
    const endpoints = new Map<string, Endpoint>();
    const missing: Pick<ModelUse, 'provider' | 'setting'>[] = [];
    for (const use of uses) {
      if (endpoints.has(endpointKey(use))) continue;
      const resolved = this.deps.keys.resolve(use.provider, use.baseURL, apiKeys ?? undefined, env);
      if (!resolved) {
        if (!missing.some((m) => m.provider === use.provider)) missing.push(use);
        continue;
      }
      endpoints.set(endpointKey(use), {
        apiKey: resolved.key,
        flowBaseURL: use.baseURL
          ? { url: use.baseURL, fetch: this.deps.egressFetch, timeoutMs: this.deps.egressTimeoutMs }
          : undefined,
      });
    }
    if (missing.length > 0) {
      throw new AppError('MISSING_CREDENTIALS', missingKeysMessage(missing));
    }
    return endpoints;
  }

  /** What the server cannot do for the flow's nodes, whether or not the graph compiles. */
  private nodeIssues(flow: Pick<Flow, 'nodes' | 'edges'>, sessionType: SessionType): FlowIssue[] {
    const issues: FlowIssue[] = [];
    for (const node of flow.nodes) {
      const model = modelOf(node);
      if (model && model.provider !== '' && (model.kind === 'llm' || sessionType === 'voice')) {
        const { kind: modality, provider } = model;
        const spec = providerSpec(provider);
        if (!spec?.[modality]) {
          issues.push({
            code: 'PROVIDER_UNSUPPORTED',
            message:
              `this server cannot run ${provider} as ${modality.toUpperCase()}: ` +
              (spec?.unsupported?.[modality] ?? `supported are ${providersFor(modality).join(', ')}`),
            nodeId: node.id,
          });
          continue;
        }
        const baseIssue = model.baseURL ? baseUrlIssue(provider, modality, node, model.baseURL) : undefined;
        if (baseIssue) {
          issues.push({ code: 'BASE_URL_UNSUPPORTED', message: baseIssue, nodeId: node.id });
          continue;
        }
      }
      // set and well-formed only: the compiler reports the others
      for (const { param, url } of urlsOf(node)) {
        const verdict = this.deps.policy.checkUrl(url);
        if (!verdict.ok) {
          issues.push({
            code: 'URL_NOT_ALLOWED',
            message: `\`${param}\` ${verdict.reason}`,
            nodeId: node.id,
          });
        }
      }
    }
    return issues;
  }

  private requirements(uses: ModelUse[], env: KeyEnv): ProviderRequirement[] {
    const byProvider = new Map<string, ProviderRequirement>();
    for (const use of uses) {
      const spec = providerSpec(use.provider);
      const server =
        spec !== undefined &&
        this.deps.keys.serverKeyMayGo(spec, use.baseURL) &&
        this.deps.keys.serverKey(use.provider, env) !== undefined;
      const keyless = spec !== undefined && !server && this.deps.keys.keyless(spec, use.baseURL);
      const req = byProvider.get(use.provider) ?? { provider: use.provider, nodeIds: [], key: 'server' };
      if (!req.nodeIds.includes(use.nodeId)) req.nodeIds.push(use.nodeId);
      // one use that needs a sent key makes the provider's; keyless only when no use needs one
      if (!server) req.key = req.key === 'request' || !keyless ? 'request' : 'none';
      byProvider.set(use.provider, req);
    }
    return [...byProvider.values()];
  }
}

/** Why a model node may not name its own `baseURL` (undefined: it may). */
function baseUrlIssue(
  provider: string,
  modality: Modality,
  node: Flow['nodes'][number],
  baseURL: string,
): string | undefined {
  const spec = providerSpec(provider)!;
  if (spec.literalBaseURL?.includes(modality)) {
    const host = new URL(baseURL).hostname.replace(/^\[|\]$/g, '');
    return isIP(host)
      ? undefined
      : `${provider} ${modality.toUpperCase()} connects by itself, so a flow's \`baseURL\` for it must name an address (e.g. http://10.0.0.5:8080), not a host name`;
  }
  if (!spec.customBaseURL.includes(modality)) {
    return `${provider} ${modality.toUpperCase()} runs only against ${spec.defaultBaseURL}: remove \`baseURL\``;
  }
  if (modality === 'stt' && node.mode === 'realtime') {
    return 'the realtime mode runs only against OpenAI itself: remove `baseURL`, or set `mode` to file';
  }
  return undefined;
}

/**
 * What to do about providers with no key: only a model at its provider's own endpoint lacks one (a flow's
 * own base URL runs keyless), so it says which request field, or which server variable, would bring it; and
 * for a model beside the flow, which setting chose it.
 */
function missingKeysMessage(missing: Pick<ModelUse, 'provider' | 'setting'>[]): string {
  const providers = missing.map((m) => m.provider);
  const settings = missing.flatMap((m) => (m.setting ? [m.setting] : []));
  const each = providers.map((p) => {
    const vars = providerSpec(p)?.envVars ?? [];
    const server = vars.length > 0 ? `, or set ${vars.join(' or ')} on the server` : '';
    return `send apiKeys.${p}${server}`;
  });
  const which = settings.length > 0 ? ` (${settings.join('; ')})` : '';
  return `missing API key for ${providers.join(', ')}${which}: ${each.join('; ')}`;
}
