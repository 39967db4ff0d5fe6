import type { ApiKeys } from '@vab/contracts';
import { providerSpec, type ProviderSpec } from './providers.js';

/** Provider key variables as the server has them now (its env file over its process environment). */
export type KeyEnv = Readonly<Record<string, string | undefined>>;

export type KeySource = 'request' | 'server' | 'none';

/**
 * The key a model at a flow's own base URL runs with when no key may go there: OpenAI-compatible local
 * servers (Ollama, vLLM, llama.cpp) need none, but the clients insist on one. A fixed placeholder, never a
 * server secret; a server there that does need a key answers 401 at the first call.
 */
export const NO_KEY = 'no-key';

const given = (v: string | null | undefined): v is string => typeof v === 'string' && v.trim() !== '';

/** Parses `TRUSTED_MODEL_URLS`: comma-separated base URLs. Throws on an entry that is not an http(s) URL. */
export function parseTrustedUrls(text: string | undefined): URL[] {
  return (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const url = URL.canParse(s) ? new URL(s) : undefined;
      if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
        throw new Error(`"${s}" is not an http(s) URL`);
      }
      return url;
    });
}

const withSlash = (path: string) => (path.endsWith('/') ? path : `${path}/`);

/** Whether `url` lies under `base`: the same origin, and a path at or below the base's. */
function under(url: string, base: URL): boolean {
  if (!URL.canParse(url)) return false;
  const u = new URL(url);
  return u.origin === base.origin && withSlash(u.pathname).startsWith(withSlash(base.pathname));
}

/**
 * Where each key may go. A key sent with the request is the caller's own, used wherever the flow points.
 * The server's key (from its environment) is sent only to the provider's own endpoint, or to a base URL the
 * operator trusts with it (`TRUSTED_MODEL_URLS`, e.g. a self-hosted gateway): a flow that names any other
 * `baseURL` gets no server key, so saving a flow can never collect the operator's keys.
 */
export class KeyRule {
  constructor(private readonly trusted: readonly URL[]) {}

  serverKeyMayGo(spec: ProviderSpec, baseURL: string | undefined): boolean {
    return (
      baseURL === undefined ||
      under(baseURL, new URL(spec.defaultBaseURL)) ||
      this.trusted.some((t) => under(baseURL, t))
    );
  }

  /** The server's key of a provider, whatever its destination (for the key status only). */
  serverKey(provider: string, env: KeyEnv): string | undefined {
    return providerSpec(provider)
      ?.envVars.map((name) => env[name])
      .find(given);
  }

  /**
   * The key a model of `provider` at `baseURL` runs with, and where it came from: the request's, the
   * server's where it may go, else at a flow's own URL none (NO_KEY); undefined: the provider's own endpoint
   * and no key for it.
   */
  resolve(
    provider: string,
    baseURL: string | undefined,
    apiKeys: ApiKeys | undefined,
    env: KeyEnv,
  ): { key: string; source: KeySource } | undefined {
    const fromRequest = apiKeys && Object.hasOwn(apiKeys, provider) ? apiKeys[provider] : undefined;
    if (given(fromRequest)) return { key: fromRequest, source: 'request' };
    const spec = providerSpec(provider);
    if (!spec) return undefined;
    const key = this.serverKeyMayGo(spec, baseURL) ? this.serverKey(provider, env) : undefined;
    if (key !== undefined) return { key, source: 'server' };
    return this.keyless(spec, baseURL) ? { key: NO_KEY, source: 'none' } : undefined;
  }

  /** A model at a flow's own base URL (not the provider's endpoint) may run without a key. */
  keyless(spec: ProviderSpec, baseURL: string | undefined): boolean {
    return baseURL !== undefined && !under(baseURL, new URL(spec.defaultBaseURL));
  }
}
