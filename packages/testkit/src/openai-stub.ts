// One OpenAI-compatible stub for tests and benchmarks. Its routes are one table (`routes` below): an
// endpoint more (e.g. `/audio/transcriptions`, `/audio/speech`) is one entry, with its script in
// `OpenAiStubOptions` beside `chat`.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { listenOnLoopback } from './ports.js';

/** What the stub was asked: the messages, the tools offered, and whether a tool call was forced. */
export interface ChatRequest {
  model: string;
  max_completion_tokens?: number;
  temperature?: number;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: 'function'; function: { name: string; description?: string; parameters?: unknown } }[];
  tool_choice?: unknown;
  stream?: boolean;
}

export interface ChatReply {
  content?: string;
  toolCalls?: { name: string; args: Record<string, unknown> }[];
  /** Answer with this HTTP status instead (e.g. 500 to simulate a failing model). */
  status?: number;
  /** With `status`: the error message the answer carries (a provider that echoes what it was sent). */
  errorMessage?: string;
  /** Answer only after this long (a slow model). */
  delayMs?: number;
  /** Start the answer at once, but send its first token only after this long (time to first token). */
  firstTokenDelayMs?: number;
  /** With `wordByWord`: the words after the first only after this long (a model slow to finish its answer). */
  restDelayMs?: number;
  /** Stream the content word by word (one chunk each), as a real model does. */
  wordByWord?: boolean;
  /** Stream the content in pieces of this many characters (one chunk each): a model streaming one long word. */
  pieceChars?: number;
  /** Answer this many bytes of event stream, one event of garbage without an end (a hostile model server). */
  floodBytes?: number;
}

export type Script = (req: ChatRequest) => ChatReply;

/** Text of a message whatever its content shape (string or content parts). */
export function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p: { text?: string }) => p.text ?? '').join('');
  return '';
}

export function lastUserText(req: ChatRequest): string {
  const users = req.messages.filter((m) => m.role === 'user');
  return textOf(users.at(-1)?.content);
}

/** Whether the request offers the model a tool of this name. */
export function offersTool(req: ChatRequest, name: string): boolean {
  return req.tools?.some((t) => t.function.name === name) ?? false;
}

export function systemText(req: ChatRequest): string {
  return req.messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => textOf(m.content))
    .join('\n');
}

/**
 * The model of the clinic flow (testkit's fullFlow): classifies from the user's lines (booking, question),
 * confirms on "yes", extracts `{ name: 'Ada', urgent: true }`, and otherwise replies "ok: <what the user
 * said>".
 */
export function clinicScript(req: ChatRequest): ChatReply {
  const prompt = textOf(req.messages.at(-1)?.content).toLowerCase();
  const users = prompt
    .split('\n')
    .filter((l) => l.startsWith('user:'))
    .join(' ');
  if (offersTool(req, 'decide')) {
    if (prompt.includes('why do they call')) {
      const choice = users.includes('book')
        ? 'booking'
        : users.includes('question')
          ? 'question'
          : 'none yet';
      return { toolCalls: [{ name: 'decide', args: { choice } }] };
    }
    return { toolCalls: [{ name: 'decide', args: { choice: users.includes('yes') ? 'true' : 'false' } }] };
  }
  if (offersTool(req, 'extract'))
    return { toolCalls: [{ name: 'extract', args: { name: 'Ada', urgent: true } }] };
  const lastUser = req.messages.filter((m) => m.role === 'user').at(-1);
  return { content: `ok: ${textOf(lastUser?.content)}` };
}

async function body(req: IncomingMessage): Promise<string> {
  let data = '';
  for await (const chunk of req) data += chunk;
  return data;
}

export interface OpenAiStubOptions {
  /** What each chat completion answers. */
  chat: Script;
  /** Keep every chat request in `requests` (default true; a benchmark of thousands of calls turns it off). */
  keepRequests?: boolean;
}

export interface OpenAiStub {
  /** The `baseURL` a provider is given: `http://127.0.0.1:<port>/v1`. */
  baseURL: string;
  /** Every chat request it got, in order (unless `keepRequests: false`). */
  requests: ChatRequest[];
  /** The Authorization header of every request it got (chat and model list alike): which key came. */
  authorizations: (string | undefined)[];
  /** Requests answered, and the time spent on its side answering them (ms): a benchmark's own share. */
  served: { calls: number; ms: number };
  close(): Promise<void>;
}

/** A route's key: `<METHOD> <path end>`, matched against the end of the request's path. */
type Route = (req: IncomingMessage, res: ServerResponse) => Promise<void>;

/**
 * An OpenAI-compatible server on loopback, scripted per request, so the real OpenAI plugin talks real HTTP
 * (chat completions streamed as SSE with content and tool calls; the model list) and no test reaches the
 * internet. `startOpenAiStub(script)` is `startOpenAiStub({ chat: script })`.
 */
export async function startOpenAiStub(options: Script | OpenAiStubOptions): Promise<OpenAiStub> {
  const opts = typeof options === 'function' ? { chat: options } : options;
  const requests: ChatRequest[] = [];
  const authorizations: (string | undefined)[] = [];
  const served = { calls: 0, ms: 0 };
  let chats = 0;
  const routes: Record<string, Route> = {
    'GET /models': async (_req, res) => {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: [{ id: 'stub', object: 'model' }] }));
    },
    'POST /chat/completions': async (req, res) => {
      const chat = JSON.parse(await body(req)) as ChatRequest;
      if (opts.keepRequests !== false) requests.push(chat);
      await streamChat(res, chat, opts.chat(chat), ++chats);
    },
  };
  const server = createServer((req, res) => {
    const started = performance.now();
    res.on('finish', () => {
      served.calls++;
      served.ms += performance.now() - started;
    });
    authorizations.push(req.headers.authorization);
    // by the path's end, whatever comes before it (a provider's `baseURL` may carry a prefix of its own)
    const path = `${req.method} ${req.url?.split('?')[0]}`;
    const route = Object.entries(routes).find(
      ([k]) => path.startsWith(k.split(' ')[0]!) && path.endsWith(k.split(' ')[1]!),
    )?.[1];
    if (!route) res.writeHead(404).end();
    else void route(req, res);
  });
  const port = await listenOnLoopback(server);
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    authorizations,
    served,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/**
 * `bytes` of `contentType` (spaces), in 64 KB writes as fast as the socket takes them, then the end: what a
 * server answering more than any client should read sends.
 */
export async function flood(res: ServerResponse, contentType: string, bytes: number): Promise<void> {
  res.writeHead(200, { 'content-type': contentType });
  const block = Buffer.alloc(64 * 1024, ' ');
  for (let sent = 0; sent < bytes && !res.destroyed; sent += block.length) {
    if (res.write(block.subarray(0, Math.min(block.length, bytes - sent)))) continue;
    // drained, or closed by a client that stopped reading
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  }
  res.end();
}

/** One chat completion as the OpenAI API streams it: role, content, tool calls, finish, usage, [DONE]. */
async function streamChat(res: ServerResponse, chat: ChatRequest, reply: ChatReply, n: number) {
  if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
  if (reply.status) {
    res
      .writeHead(reply.status, { 'content-type': 'application/json' })
      .end(
        JSON.stringify({ error: { message: reply.errorMessage ?? 'stub failure', type: 'server_error' } }),
      );
    return;
  }
  if (reply.floodBytes) {
    await flood(res, 'text/event-stream', reply.floodBytes);
    return;
  }
  const base = { id: `chatcmpl-${n}`, object: 'chat.completion.chunk', created: 0, model: chat.model };
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(chunk({ role: 'assistant', content: '' }));
  if (reply.firstTokenDelayMs) await new Promise((r) => setTimeout(r, reply.firstTokenDelayMs));
  if (reply.content && reply.wordByWord) {
    const words = reply.content.split(/(?<= )/);
    for (const [i, word] of words.entries()) {
      res.write(chunk({ content: word }));
      await new Promise((r) => setTimeout(r, i === 0 && reply.restDelayMs ? reply.restDelayMs : 2));
    }
  } else if (reply.content && reply.pieceChars) {
    for (let at = 0; at < reply.content.length; at += reply.pieceChars) {
      // as fast as the socket takes them
      if (!res.write(chunk({ content: reply.content.slice(at, at + reply.pieceChars) })))
        await new Promise((r) => res.once('drain', r));
    }
  } else if (reply.content) res.write(chunk({ content: reply.content }));
  (reply.toolCalls ?? []).forEach((tc, index) =>
    res.write(
      chunk({
        tool_calls: [
          {
            index,
            id: `call_${n}_${index}`,
            type: 'function',
            function: { name: tc.name, arguments: JSON.stringify(tc.args) },
          },
        ],
      }),
    ),
  );
  res.write(chunk({}, reply.toolCalls?.length ? 'tool_calls' : 'stop'));
  res.write(
    `data: ${JSON.stringify({ ...base, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`,
  );
  res.end('data: [DONE]\n\n');
}
