import { tokenize, tts as livekitTts, type llm, type stt, type tts } from '@livekit/agents';
import type { ApiKeys, CallerEar, CallerVoice, CaseModel, Flow, SessionType } from '@vab/contracts';
import type { CompiledFlow, LlmConfig, SttConfig, TtsConfig } from '@vab/flow';
import type { KeyEnv } from './provider-keys.js';
import { providerSpec, type Endpoint } from './providers.js';
import { endpointKey, type BesideModel, type CheckedFlow, type ReadinessCheck } from './readiness.js';

/**
 * A flow this server can run, with the keys resolved: it makes the flow's models (each once) and nothing
 * else can read the keys. Made only by `ModelFactory.require`.
 */
export interface RunnableFlow {
  config: CompiledFlow;
  sessionType: SessionType;
  /** The seed its models run with, where their provider takes one (the agent model's decides); else null. */
  seed: number | null;
  llm(cfg: LlmConfig): llm.LLM;
  /** Voice only. */
  tts(): tts.TTS;
  stt(): stt.STT;
}

/**
 * Makes the models of what the readiness check passed, and only those: a flow's (`require`), a model beside
 * it (`requireModel`), the simulated caller's voice and ear (`requireSpeech`). Each asks the check first, so
 * nothing is made that the check refuses.
 */
export class ModelFactory {
  constructor(private readonly readiness: ReadinessCheck) {}

  /** A flow that can start now with these keys, or the error a client gets (422 before 400). */
  require(
    flow: Flow,
    sessionType: SessionType,
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
    opts: { seed?: number | undefined } = {},
  ): RunnableFlow {
    return runnable(this.readiness.check(flow, sessionType, env, apiKeys), opts.seed);
  }

  /** A model a test case runs beside its flow, checked (`ReadinessCheck.checkModel`) and made. */
  requireModel(
    who: BesideModel,
    choice: CaseModel | null | undefined,
    fallback: LlmConfig,
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
    seed?: number,
  ): llm.LLM {
    const { cfg, endpoint } = this.readiness.checkModel(who, choice, fallback, env, apiKeys);
    const spec = providerSpec(cfg.provider)!;
    return spec.llm!(seed !== undefined && spec.seed ? { ...cfg, seed } : cfg, endpoint);
  }

  /**
   * The simulated caller's voice (`tts`) or ear (`stt`), checked (`ReadinessCheck.checkSpeech`) and made.
   * `speed` (the caller's speaking rate) goes to the TTS as the provider's own speed param.
   */
  requireSpeech(
    who: BesideModel,
    modality: 'tts' | 'stt',
    choice: (CallerVoice & CallerEar) | CallerVoice | CallerEar | undefined,
    flow: CompiledFlow,
    env: KeyEnv,
    apiKeys: ApiKeys | null | undefined,
    opts: { speed?: number | undefined } = {},
  ): { model: tts.TTS | stt.STT; provider: string; modelName: string } {
    const { role } = who;
    const checked = this.readiness.checkSpeech(who, modality, choice, flow, env, apiKeys);
    const { picked, provider, baseURL, modelName, endpoint } = checked;
    const own = flow.providers[modality];
    const spec = providerSpec(provider)!;
    // what a voice and an ear both name: whose, which provider and model, at which server
    const common = { nodeId: role, provider, model: picked.model as string | undefined, baseURL };
    if (modality === 'tts') {
      const extras = { ...(choice ? {} : (own as TtsConfig).extras) };
      if (opts.speed !== undefined) extras.speed = opts.speed;
      const cfg: TtsConfig = { ...common, voiceId: picked.voiceId as string | undefined, extras };
      return { model: spec.tts!(cfg, endpoint), provider, modelName };
    }
    const cfg: SttConfig = {
      ...common,
      language: picked.language as string | undefined,
      // the caller's ear posts each utterance as a file unless the flow's own STT says otherwise
      mode: choice ? 'file' : (own as SttConfig).mode,
      ...(choice ? {} : { keyterms: (own as SttConfig).keyterms }),
    };
    return {
      model: spec.stt!(cfg, cfg.language ?? flow.agent.language, endpoint),
      provider,
      modelName,
    };
  }
}

/**
 * A TTS that streams. LiveKit wraps one that does not (OpenAI's HTTP speech) in a new `StreamAdapter` for
 * every reply, with no error listener on it: a failed synthesis is then re-emitted as an unhandled `error`
 * event (a crash) and every reply leaves a listener on the model. Wrapped once here, the adapter is the
 * session's own TTS, whose errors the session listens to.
 */
function streamingTts(model: tts.TTS): tts.TTS {
  if (model.capabilities.streaming) return model;
  return new livekitTts.StreamAdapter(model, new tokenize.basic.SentenceTokenizer());
}

function runnable(checked: CheckedFlow, seed: number | undefined): RunnableFlow {
  const { config, sessionType, endpoints } = checked;
  const endpoint = (use: { provider: string; baseURL?: string | undefined }): Endpoint => {
    const e = endpoints.get(endpointKey(use));
    if (!e) throw new Error(`no endpoint resolved for ${use.provider}`);
    return e;
  };
  const spec = (provider: string) => {
    const s = providerSpec(provider);
    if (!s) throw new Error(`unknown provider ${provider}`);
    return s;
  };
  const llms = new Map<string, llm.LLM>();
  const seeded = (provider: string) => seed !== undefined && spec(provider).seed === true;
  return {
    config,
    sessionType,
    seed: seeded(config.providers.llm.provider) ? seed! : null,
    llm(cfg) {
      let model = llms.get(cfg.nodeId);
      if (!model) {
        const s = spec(cfg.provider);
        model = s.llm!(seeded(cfg.provider) ? { ...cfg, seed } : cfg, endpoint(cfg));
        llms.set(cfg.nodeId, model);
      }
      return model;
    },
    tts() {
      const t = config.providers.tts;
      return streamingTts(spec(t.provider).tts!(t, endpoint(t)));
    },
    stt() {
      const s = config.providers.stt;
      return spec(s.provider).stt!(s, s.language ?? config.agent.language, endpoint(s));
    },
  };
}
