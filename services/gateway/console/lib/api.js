// @ts-check
// This origin's API: calls with the token, errors, tickets for streams, server-sent events. No DOM here: a
// 401 asks for a token through the prompt the page sets (`setTokenPrompt`).

import { EventSourceParserStream } from './vendor/eventsource-parser/stream.js';

export const TOKEN_KEY = 'vab-console-token';

/**
 * The API's own types (packages/client/src/schema.ts, made from the API document), for the checker only.
 * @typedef {import('../../../../packages/client/src/schema.ts').components['schemas']} Schemas
 * @typedef {Schemas['FlowInput']} Flow
 * @typedef {Schemas['FlowValidation']} FlowValidation
 * @typedef {Schemas['FlowIssue']} FlowIssue
 * @typedef {{ signal?: AbortSignal, headers?: Record<string, string> }} CallInit
 */

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const enc = encodeURIComponent;
export const agentPath = (agentId) => `/api/agents/${enc(agentId)}`;
export const sessionPath = (agentId, sessionId) => `${agentPath(agentId)}/test-sessions/${enc(sessionId)}`;
export const callPath = (agentId, callId) => `${agentPath(agentId)}/calls/${enc(callId)}`;
/**
 * Where a session's record is, under which its `/events` and `/recording` are: a test session's path, or
 * the one it names (a call's).
 * @param {{ agentId: string, sessionId: string, path?: string }} s
 */
export const recordPath = (s) => s.path ?? sessionPath(s.agentId, s.sessionId);

/** @type {(rejected: boolean) => Promise<void>} */
let promptToken = () => Promise.reject(new ApiError(401, 'UNAUTHORIZED', 'this gateway needs a token'));
/** Asked for a token (once for every call waiting on it); `rejected`: the one sent was refused. */
let asked = null;

/** What asks the user for a token when the API answers 401; it resolves once one is stored. */
export function setTokenPrompt(prompt) {
  promptToken = prompt;
}

function askToken(rejected) {
  asked ??= promptToken(rejected).finally(() => {
    asked = null;
  });
  return asked;
}

/**
 * One call to this origin's API with the token when there is one; a 401 asks for a token and retries.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {CallInit} [init]
 */
export async function call(method, path, body, init = {}) {
  for (;;) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = { ...(init.headers ?? {}) };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: init.signal,
    });
    if (res.status !== 401) return res;
    await res.body?.cancel();
    await askToken(token !== null);
    init.signal?.throwIfAborted();
  }
}

/** How many of an error's `issues` its message names (a body can have many; the first say what to fix). */
const ISSUES_SHOWN = 3;

export async function errorOf(res) {
  const text = await res.text();
  try {
    const e = JSON.parse(text);
    // a refused body's `issues` say which field and why: "invalid body" alone says neither
    const issues = Array.isArray(e.issues)
      ? e.issues.slice(0, ISSUES_SHOWN).map((i) => (i.path ? `${i.path}: ${i.message}` : String(i.message)))
      : [];
    const message = [e.message ?? text, ...issues].join('; ');
    return new ApiError(res.status, e.code ?? `HTTP_${res.status}`, message);
  } catch {
    return new ApiError(res.status, `HTTP_${res.status}`, text || res.statusText);
  }
}

/**
 * A JSON call: its answer, or its error thrown as an ApiError.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {CallInit} [init]
 */
export async function json(method, path, body, init) {
  const res = await call(method, path, body, init);
  if (!res.ok) throw await errorOf(res);
  return res.status === 204 ? undefined : res.json();
}

/**
 * An EventSource cannot send a token: with tokens on (the API asked us for one) the stream is opened with a
 * single-use ticket. A gateway without the ticket route (404) takes the stream as it is.
 * @param {string} path
 * @param {AbortSignal} [signal]
 */
export async function ticketFor(path, signal) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return null;
  const res = await call('POST', '/api/tickets', { path }, { signal });
  if (res.status === 404) return null;
  if (!res.ok) throw await errorOf(res);
  return (await res.json()).ticket;
}

/**
 * Server-sent events from a fetch() body (a POST cannot be an EventSource), read by eventsource-parser (the
 * parser the tests read streams with): `{ event, id, data }` each, `event` `message` when unnamed.
 * @param {ReadableStream<Uint8Array>} body
 */
export async function* sseMessages(body) {
  const reader = body
    .pipeThrough(/** @type {TransformStream<Uint8Array, string>} */ (new TextDecoderStream()))
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    yield { event: value.event ?? 'message', id: value.id, data: value.data };
  }
}

/**
 * Validate: the flow's issues, and what it needs to run (the keys a provider asks for).
 * @param {Flow} flow
 * @param {'text' | 'voice'} [sessionType] what the flow must be able to run as
 * @param {AbortSignal} [signal]
 * @returns {Promise<FlowValidation>}
 */
export function validateFlow(flow, sessionType = 'text', signal = undefined) {
  return json('POST', '/api/flows/validate', { ...flow, sessionType }, { signal });
}
