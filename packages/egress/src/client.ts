import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { setImmediate } from 'node:timers/promises';
import type { Logger } from 'pino';
import { Agent, buildConnector, fetch as undiciFetch, Response as UndiciResponse } from 'undici';
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

/**
 * An answer (or one event of a streamed answer) over the server's byte bound: what the call that reads it fails
 * with. Its message is what reaches the builder, and the one trace of it left once a library has rewrapped the
 * error (LiveKit's model errors keep only the message): `isOverBound` tells it by that message.
 */
export class EgressResponseTooLarge extends Error {
  override readonly name = 'EgressResponseTooLarge';
  constructor(
    readonly limitBytes: number,
    what: 'answer' | 'event',
  ) {
    super(
      `${what === 'answer' ? 'the answer' : 'one event of the streamed answer'} was over the server's ` +
        `${limitBytes}-byte bound`,
    );
  }
}

/**
 * The message of an over-bound failure in `err` or its causes (the OpenAI client wraps a failed read in its
 * own error; LiveKit keeps only the message); undefined when `err` is no such failure.
 */
export function overBoundMessage(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && OVER_BOUND.test(message)) return message;
  }
  return undefined;
}
const OVER_BOUND = /was over the server's \d+-byte bound/;

/**
 * One event of an event stream (a model's streamed answer, an MCP server's) at most this long. The OpenAI
 * client looks for an event's end from the event's start again at every chunk of it: one event of the whole
 * 4 MiB bound held the event loop ~1 s (quadratic); one of 1 MiB takes ~30 ms, and no model sends an event of
 * more than a few KB.
 */
export const MAX_EVENT_BYTES = 1024 * 1024;

/** An answer is given to its reader this much at a time, the event loop free between (see `bounded`). */
const SLICE_BYTES = 8 * 1024;

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
  /**
   * A response body larger than this (as read: after any content decoding) fails its reader with
   * `EgressResponseTooLarge`; one event of an event stream larger than `MAX_EVENT_BYTES` (or this) likewise.
   */
  maxResponseBytes: number;
  log: Logger;
  resolve?: Resolver | undefined;
  /** How a refusal is logged (default: a flow's, `FLOW_EGRESS_REFUSED`); the webhooks service logs its own. */
  refusal?: Refusal | undefined;
}

/** Whose connection was refused: a flow's (the playground), a webhook delivery's, or Twilio's REST API's. */
export type Refusal = 'flow' | 'webhook' | 'telephony';

function logRefusal(log: Logger, refusal: Refusal | undefined, host: string, range: string): void {
  if (refusal === 'webhook')
    log.warn({ code: 'WEBHOOK_EGRESS_REFUSED', host, range }, 'webhook egress refused');
  else if (refusal === 'telephony')
    log.warn({ code: 'TELEPHONY_EGRESS_REFUSED', host, range }, 'telephony egress refused');
  else log.warn({ code: 'FLOW_EGRESS_REFUSED', host, range }, 'flow egress refused');
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
  refusal?: Refusal | undefined;
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
    logRefusal(opts.log, opts.refusal, host, err.range);
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
    logRefusal(opts.log, opts.refusal, host, err.range);
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
    // no maxResponseSize: undici's cuts the socket ("terminated", from a socket callback, no trace of why);
    // the bound is the body's own (`bounded`), counted as read, which also bounds a compressed answer
  });
  const egressFetch = async (input: unknown, init?: RequestInit) =>
    bounded(
      await undiciFetch(
        input as never,
        { ...(init as object), ...(await multipartOf(init)), dispatcher, redirect: 'manual' } as never,
      ),
      opts.maxResponseBytes,
    );
  // what the OpenAI SDK probes to see that this fetch takes the global FormData (a speech-to-text upload)
  return Object.assign(egressFetch, { Response: globalThis.Response }) as unknown as EgressFetch;
}

/**
 * The answer with its body bounded: reading past `maxBytes` (or a declared `content-length` over it), or one
 * event of an event stream past `MAX_EVENT_BYTES`, fails the read with `EgressResponseTooLarge` and cancels the
 * rest (the connection closes). Whoever reads the body — a model client, the MCP client, a webhook's text —
 * gets that error as any failed read, with its reason in the message.
 */
function bounded(res: UndiciResponse, maxBytes: number): UndiciResponse {
  if (!res.body) return res;
  const declared = Number(res.headers.get('content-length') ?? 0);
  const eventMax = Math.min(MAX_EVENT_BYTES, maxBytes);
  const events = /^text\/event-stream/i.test(res.headers.get('content-type') ?? '')
    ? eventBound(eventMax)
    : undefined;
  let read = 0;
  const limit = new TransformStream<Uint8Array, Uint8Array>({
    start(controller) {
      if (declared > maxBytes) controller.error(new EgressResponseTooLarge(maxBytes, 'answer'));
    },
    async transform(chunk, controller) {
      read += chunk.byteLength;
      if (read > maxBytes) return controller.error(new EgressResponseTooLarge(maxBytes, 'answer'));
      if (events && !events(chunk)) return controller.error(new EgressResponseTooLarge(eventMax, 'event'));
      // given on in slices, the event loop free between them: a reader takes what it is given in one go
      // (the OpenAI client's stream and LiveKit's behind it: a model's 1 MB of deltas, all read at once,
      // held the loop 0.6 s, and every other session with it)
      for (let at = 0; at < chunk.byteLength; at += SLICE_BYTES) {
        if (at > 0 || read > chunk.byteLength) await setImmediate();
        controller.enqueue(chunk.subarray(at, at + SLICE_BYTES));
      }
    },
  });
  const out = new UndiciResponse(res.body.pipeThrough(limit), {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
  });
  // what the clients read beside the body (a Response made here has no URL of its own)
  Object.defineProperty(out, 'url', { value: res.url });
  return out;
}

/**
 * Counts the bytes since the last event boundary of an event stream (a blank line: `\n\n`, `\r\r` or
 * `\r\n\r\n`, as the OpenAI client splits it), across chunks, in one pass; false once an event is over `max`.
 */
function eventBound(max: number): (chunk: Uint8Array) => boolean {
  const LF = 10;
  const CR = 13;
  let run = 0;
  let p1 = 0;
  let p2 = 0;
  let p3 = 0;
  return (chunk) => {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // where the next LF and CR are: found natively, not byte by byte, and each looked for again once passed
    let lf = -2;
    let cr = -2;
    for (let i = 0; i < bytes.length;) {
      if (lf !== -1 && lf < i) lf = bytes.indexOf(LF, i);
      if (cr !== -1 && cr < i) cr = bytes.indexOf(CR, i);
      const next = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      const end = next < 0 ? bytes.length : next;
      if (end > i) {
        run += end - i;
        p1 = p2 = p3 = 0;
      }
      // the blank line's first bytes (up to 3) are not the event's
      if (run > max + 3) return false;
      if (next < 0) break;
      const b = bytes[next]!;
      const boundary =
        (b === LF && p1 === LF) ||
        (b === CR && p1 === CR) ||
        (b === LF && p1 === CR && p2 === LF && p3 === CR);
      run = boundary ? 0 : run + 1;
      if (run > max + 3) return false;
      p3 = p2;
      p2 = p1;
      p1 = b;
      i = next + 1;
    }
    return true;
  };
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
