import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import { Agent, buildConnector, fetch as undiciFetch } from 'undici';
import { internalRange, type EgressPolicy } from './policy.js';

/** A connection the policy refused; what the caller logs and what a model or MCP call fails with. */
export class EgressRefused extends Error {
  override readonly name = 'EgressRefused';
  constructor(
    readonly host: string,
    readonly range: string,
  ) {
    super(`${host} resolves to a ${range} address that flows may not reach`);
  }
}

/** Resolves a host name to every address it has (tests inject one that answers what they need). */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { all: true, verbatim: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses),
    ),
  );

export interface EgressClientOptions {
  policy: EgressPolicy;
  /** Bound on connecting, on waiting for the headers, and on any pause while the body streams. */
  timeoutMs: number;
  /** A response body larger than this is cut off with an error. */
  maxResponseBytes: number;
  log: Logger;
  resolve?: Resolver | undefined;
}

/**
 * The check for a connection this process cannot hook (LiveKit's rtc-node dials the media server from its
 * native FFI): resolve the name now and refuse it unless every address it resolves to is permitted. What
 * it cannot cover — the name resolving elsewhere between this check and the native connect (DNS
 * rebinding) — is written down in docs/operations.md.
 */
export type HostCheck = (url: string) => Promise<void>;

export function createHostCheck(opts: {
  policy: EgressPolicy;
  log: Logger;
  resolve?: Resolver | undefined;
}): HostCheck {
  const resolve = opts.resolve ?? systemResolver;
  return async (text) => {
    const host = new URL(text).hostname.replace(/^\[|\]$/g, '');
    let addresses: string[];
    try {
      addresses = isIP(host) ? [host] : (await resolve(host)).map((a) => a.address);
    } catch {
      return; // a name that does not resolve reaches nothing; the connect fails as unreachable
    }
    const inside = addresses.find((a) => !opts.policy.permits(host, a));
    if (inside === undefined) return;
    const err = new EgressRefused(host, internalRange(inside) ?? 'refused');
    opts.log.warn({ code: 'FLOW_EGRESS_REFUSED', host, range: err.range }, 'flow egress refused');
    throw err;
  };
}

/** `fetch` as flows get it: every address checked when connecting, no redirects followed, bounded. */
export type EgressFetch = typeof globalThis.fetch;

/**
 * The HTTP client for every URL a flow names (webhooks, model base URLs, MCP servers). The check sits in the
 * socket's own address lookup, so it applies to the address actually connected to — a name that resolves
 * inside, or that resolves elsewhere by the time of the connect (DNS rebinding), is refused before a byte
 * is sent. Only the addresses the policy permits are handed to the connect; none left is a refusal.
 */
export function createEgressFetch(opts: EgressClientOptions): EgressFetch {
  const resolve = opts.resolve ?? systemResolver;
  const refuse = (host: string, address: string) => {
    const err = new EgressRefused(host, internalRange(address) ?? 'refused');
    opts.log.warn({ code: 'FLOW_EGRESS_REFUSED', host, range: err.range }, 'flow egress refused');
    return err;
  };
  const lookup: LookupFunction = (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const permitted = addresses.filter((a) => opts.policy.permits(hostname, a.address));
        const first = permitted[0];
        if (!first) {
          callback(refuse(hostname, addresses[0]?.address ?? ''), '', 0);
          return;
        }
        if (options.all) (callback as (e: null, a: LookupAddress[]) => void)(null, permitted);
        else callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
  const connector = buildConnector({ timeout: opts.timeoutMs, lookup } as buildConnector.BuildOptions);
  const dispatcher = new Agent({
    // an address written in the URL is never looked up, so it is checked here
    connect: (options, callback) => {
      const host = options.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host) && !opts.policy.permits(host, host)) {
        callback(refuse(host, host), null);
        return;
      }
      connector(options, callback);
    },
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
    maxResponseSize: opts.maxResponseBytes,
  });
  const egressFetch = async (input: unknown, init?: RequestInit) =>
    undiciFetch(
      input as never,
      { ...(init as object), ...(await multipartOf(init)), dispatcher, redirect: 'manual' } as never,
    );
  // what the OpenAI SDK probes to see that this fetch takes the global FormData (a speech-to-text upload)
  return Object.assign(egressFetch, { Response: globalThis.Response }) as unknown as EgressFetch;
}

/**
 * A body of Node's global FormData (an OpenAI file upload) encoded as multipart by Node's own Request: the
 * undici package's fetch would take it for an unknown object and send "[object FormData]".
 */
async function multipartOf(init: RequestInit | undefined): Promise<Partial<RequestInit>> {
  if (!(init?.body instanceof FormData)) return {};
  const encoded = new Request('http://multipart.invalid/', { method: 'POST', body: init.body });
  const headers = new Headers(init.headers);
  headers.set('content-type', encoded.headers.get('content-type')!);
  return { body: Buffer.from(await encoded.arrayBuffer()), headers };
}
