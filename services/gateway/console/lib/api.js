// @ts-check
// This origin's API: calls with the token, errors, tickets for streams, server-sent events.

import { $ } from './dom.js';

export const TOKEN_KEY = 'vab-console-token';

// ---- API -----------------------------------------------------------------------------------------

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

export let tokenAsked = null;

/** Shows the token form (once for every call waiting on it); resolves when a token was entered. */
export function askToken(rejected) {
  if (tokenAsked) return tokenAsked;
  const dialog = $('auth');
  const form = $('auth-form');
  const input = $('token');
  input.value = '';
  $('auth-error').hidden = !rejected;
  tokenAsked = new Promise((resolve) => {
    form.onsubmit = (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      form.onsubmit = null;
      dialog.close();
      tokenAsked = null;
      resolve();
    };
  });
  dialog.showModal();
  return tokenAsked;
}

/** One call to this origin's API with the token when there is one; a 401 asks for a token and retries. */
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
  }
}

export async function errorOf(res) {
  const text = await res.text();
  try {
    const e = JSON.parse(text);
    return new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? text);
  } catch {
    return new ApiError(res.status, `HTTP_${res.status}`, text || res.statusText);
  }
}

export async function json(method, path, body) {
  const res = await call(method, path, body);
  if (!res.ok) throw await errorOf(res);
  return res.status === 204 ? undefined : res.json();
}

/**
 * An EventSource cannot send a token: with tokens on (the API asked us for one) the stream is opened with a
 * single-use ticket. A gateway without the ticket route (404) takes the stream as it is.
 */
export async function ticketFor(path) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return null;
  const res = await call('POST', '/api/tickets', { path });
  if (res.status === 404) return null;
  if (!res.ok) throw await errorOf(res);
  return (await res.json()).ticket;
}

/** Server-sent events from a fetch() body (a POST cannot be an EventSource): { event, id, data } each. */
export async function* sseMessages(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let msg = { event: 'message', id: undefined, data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === '') {
        if (msg.data.length > 0) yield { event: msg.event, id: msg.id, data: msg.data.join('\n') };
        msg = { event: 'message', id: undefined, data: [] };
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') msg.event = value;
      else if (field === 'data') msg.data.push(value);
      else if (field === 'id') msg.id = value;
    }
  }
}
