import {
  freePort,
  fullFlow,
  startLocalNats,
  startLocalRedis,
  startOtlpReceiver,
  withEdge,
  withNode,
} from '@vab/testkit';
import type { OtlpReceiver, ReceivedSpan } from '@vab/testkit';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startMcpServer } from '../../../services/playground/test/mcp-server.js';
import {
  clinicScript,
  lastUserText,
  startOpenAiStub,
  textOf,
  type ChatRequest,
} from '../../../services/playground/test/openai-stub.js';
import { loadConfig, startTracing } from '@vab/service-kit';
import { requireBuilt, spawnService, type ServiceProcess } from '../../helpers/processes.js';
import { startStack } from '../../helpers/stack.js';

// The key a client sends for its model calls: it must reach the model and nothing else.
const KEY = 'sk-trace-test-never-exported-4242';
const SERVICES = ['agents', 'sessions', 'playground', 'gateway'] as const;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const traceparentOf = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;

interface Running {
  base: string;
  procs: Record<(typeof SERVICES)[number], ServiceProcess>;
  close(): Promise<void>;
}

/** The four services as an operator runs them (`node services/<svc>/dist/main.js`), on their own servers. */
async function startProcesses(env: (svc: string) => Record<string, string>): Promise<Running> {
  const nats = await startLocalNats();
  const redis = await startLocalRedis({ appendOnly: false });
  const port = await freePort();
  const procs = {} as Running['procs'];
  const close = async () => {
    for (const p of Object.values(procs).reverse()) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    await nats.dispose();
    await redis.dispose();
  };
  try {
    for (const svc of SERVICES) {
      const p = spawnService(svc, {
        NATS_URL: nats.url,
        REDIS_URL: redis.url,
        LOG_LEVEL: 'info',
        FLOW_EGRESS_ALLOW: '127.0.0.1',
        ENV_FILE: '/nonexistent/.env',
        PORT: String(port),
        RATE_LIMIT_MAX: '100000',
        SHUTDOWN_TIMEOUT_MS: '5000',
        ...env(svc),
      });
      procs[svc] = p;
      await p.waitFor(
        svc === 'gateway' ? 'gateway listening' : svc === 'playground' ? 'instance up' : '"msg":"serving"',
        20_000,
      );
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { base: `http://127.0.0.1:${port}`, procs, close };
}

async function json(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as any) : undefined, headers: res.headers };
}

/** Waits until the receiver holds spans of `traceId` that satisfy `done`. */
async function spansOf(receiver: OtlpReceiver, traceId: string, done: (spans: ReceivedSpan[]) => boolean) {
  const found = () => {
    const spans = receiver.spans().filter((s) => s.traceId === traceId);
    if (done(spans)) return spans;
    throw new Error(`trace ${traceId} incomplete: ${spans.map((s) => `${s.service}:${s.name}`).join(', ')}`);
  };
  try {
    return await vi.waitFor(found, { timeout: 15_000, interval: 100 });
  } catch (err) {
    if (process.env.DUMP_SPANS)
      console.log(
        JSON.stringify(
          receiver
            .spans()
            .filter((s) => s.service === 'playground')
            .map((s) => [
              s.traceId.slice(0, 6),
              s.spanId.slice(0, 6),
              s.parentSpanId.slice(0, 6),
              s.scope,
              s.name,
              Object.keys(s.attributes).join(' '),
            ]),
        ),
      );
    throw err;
  }
}

/** The chain of parents of `span` within `spans`, nearest first. */
function ancestors(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  let at: ReceivedSpan | undefined = span;
  while (at && at.parentSpanId) {
    at = spans.find((s) => s.spanId === at!.parentSpanId);
    if (at) out.push(at);
  }
  return out;
}

/** The JSON log lines of a process that carry `field` = `value`. */
const linesWith = (p: ServiceProcess, field: string, value: string) =>
  p
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l[field] === value);

const SERVER = 2;
const CLIENT = 3;

describe('traces across processes (OTLP/HTTP receiver in the test)', () => {
  beforeAll(requireBuilt);
  let receiver: OtlpReceiver;
  let stub: Awaited<ReturnType<typeof startOpenAiStub>>;
  let stack: Running;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    stub = await startOpenAiStub(clinicScript);
    // both encodings in one run: the gateway and the playground export http/json, the others http/protobuf
    stack = await startProcesses((svc) => ({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: svc === 'gateway' || svc === 'playground' ? 'http/json' : 'http/protobuf',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    }));
  }, 90_000);
  afterAll(async () => {
    await stack?.close();
    await stub?.close();
    await receiver?.close();
  });

  it('a PATCH with a client traceparent: route → bus request → handler → Redis, one trace, parented right', async () => {
    const created = await json(stack.base, 'POST', '/api/agents', { name: 'Traced', flow: fullFlow() });
    expect(created.status).toBe(201);
    const traceId = hex(16);
    const clientSpanId = hex(8);
    const res = await json(
      stack.base,
      'PATCH',
      `/api/agents/${created.body.id}`,
      { name: 'Traced 2' },
      {
        traceparent: traceparentOf(traceId, clientSpanId),
      },
    );
    expect(res.status).toBe(200);

    // every span the assertions read, each process exporting on its own schedule
    const spans = await spansOf(receiver, traceId, (s) =>
      [
        (x: ReceivedSpan) => x.service === 'gateway' && x.kind === SERVER,
        (x: ReceivedSpan) => x.service === 'gateway' && x.kind === CLIENT,
        (x: ReceivedSpan) => x.service === 'agents' && x.kind === SERVER,
        (x: ReceivedSpan) => x.service === 'agents' && x.attributes['db.system'] === 'redis',
      ].every((want) => s.some(want)),
    );
    const route = spans.find((s) => s.service === 'gateway' && s.kind === SERVER)!;
    expect(route.name).toBe('PATCH /api/agents/:id');
    expect(route.parentSpanId).toBe(clientSpanId);
    expect(route.attributes['http.route']).toBe('/api/agents/:id');
    expect(route.attributes['http.response.status_code']).toBe(200);

    const busClient = spans.find((s) => s.service === 'gateway' && s.kind === CLIENT)!;
    expect(busClient.name).toBe('request agents.update');
    expect(busClient.attributes).toMatchObject({
      'messaging.system': 'nats',
      'messaging.destination.name': 'agents.update',
      'messaging.operation.name': 'request',
    });
    expect(ancestors(busClient, spans)).toContain(route);

    const handler = spans.find((s) => s.service === 'agents' && s.kind === SERVER)!;
    expect(handler.name).toBe('process agents.update');
    expect(handler.parentSpanId).toBe(busClient.spanId);
    expect(handler.attributes['messaging.destination.name']).toBe('agents.update');

    const redis = spans.filter((s) => s.service === 'agents' && s.attributes['db.system'] === 'redis');
    expect(redis.length).toBeGreaterThan(0);
    for (const r of redis) {
      expect(r.parentSpanId).toBe(handler.spanId);
      // the command's name only: a script's arguments are stored flows
      const statement = String(r.attributes['db.statement'] ?? r.attributes['db.query.text'] ?? '');
      expect(statement).toMatch(/^[a-z]+$/);
    }
    expect(redis.map((r) => r.name)).toContain('evalsha');
  });

  it('a request that fails: both bus spans end as errors with the error code as error.type', async () => {
    const traceId = hex(16);
    const res = await json(stack.base, 'GET', `/api/agents/${'0'.repeat(8)}-no-such-agent`, undefined, {
      traceparent: traceparentOf(traceId, hex(8)),
    });
    expect(res.status).toBe(404);
    const spans = await spansOf(receiver, traceId, (s) =>
      ['gateway', 'agents'].every((svc) =>
        s.some((x) => x.service === svc && x.name.endsWith(' agents.get')),
      ),
    );
    for (const svc of ['gateway', 'agents']) {
      const span = spans.find((s) => s.service === svc && s.name.endsWith(' agents.get'))!;
      expect(span.statusCode).toBe(2);
      expect(span.attributes['error.type']).toBe('NOT_FOUND');
    }
  });

  it('a malformed traceparent is ignored: 200, and the request starts a trace of its own', async () => {
    const created = await json(stack.base, 'POST', '/api/agents', { name: 'Malformed' });
    const res = await json(
      stack.base,
      'PATCH',
      `/api/agents/${created.body.id}`,
      { name: 'M2' },
      {
        traceparent: '00-not-a-trace-id-01',
        'x-request-id': 'malformed-tp-1',
      },
    );
    expect(res.status).toBe(200);
    const line = await waitForLine(stack.procs.gateway, 'requestId', 'malformed-tp-1', 'request completed');
    const traceId = String(line.trace_id);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    const spans = await spansOf(receiver, traceId, (s) =>
      s.some((x) => x.service === 'gateway' && x.kind === SERVER),
    );
    const route = spans.find((s) => s.service === 'gateway' && s.kind === SERVER)!;
    expect(route.parentSpanId).toBe('');
  });

  it("a text session's turns down to the model call, with the GenAI attributes; the key is in no export", async () => {
    // nothing listens there: the webhook fails, its span is there all the same
    const closedPort = await freePort();
    const flow = withNode(withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }), 'hook', {
      url: `http://127.0.0.1:${closedPort}/unreachable?key=flow-secret-in-query`,
    });
    const created = await json(stack.base, 'POST', '/api/agents', { name: 'Clinic', flow });
    expect(created.status).toBe(201);
    // the session's trace: its start request, LiveKit's session span, and every turn the session runs
    const sessionTrace = hex(16);
    const startSpan = hex(8);
    const started = await json(
      stack.base,
      'POST',
      `/api/agents/${created.body.id}/text-sessions`,
      { apiKeys: { openai: KEY } },
      { traceparent: traceparentOf(sessionTrace, startSpan) },
    );
    expect(started.status).toBe(201);
    const turnTo = (text: string, headers: Record<string, string> = {}) =>
      json(
        stack.base,
        'POST',
        `/api/agents/${created.body.id}/text-sessions/${started.body.sessionId}/turns`,
        { text },
        headers,
      );
    const turnTrace = hex(16);
    const turn = await turnTo('Hi', { traceparent: traceparentOf(turnTrace, hex(8)) });
    expect(turn.status).toBe(200);
    expect(turn.body.replies).toEqual(['ok: Hi']);

    // the turn's request: route → bus → the playground's handler, linked to the session it belongs to
    const turnSpans = await spansOf(receiver, turnTrace, (s) =>
      s.some((x) => x.service === 'playground' && x.kind === SERVER),
    );
    const turnHandler = turnSpans.find((x) => x.service === 'playground' && x.kind === SERVER)!;
    expect(turnHandler.name).toBe('process playground.text.turn');
    expect(turnHandler.links).toContainEqual(expect.objectContaining({ traceId: sessionTrace }));

    // the model call, under LiveKit's session and turn spans, under the start request the client traced
    const spans = await spansOf(receiver, sessionTrace, (s) =>
      s.some((x) => x.attributes['gen_ai.usage.output_tokens'] !== undefined),
    );
    const model = spans.find((s) => s.attributes['gen_ai.usage.output_tokens'] !== undefined)!;
    expect(model.service).toBe('playground');
    expect(model.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'stub',
      // LiveKit names an OpenAI-compatible server by its address
      'gen_ai.provider.name': new URL(stub.baseURL).host,
      'gen_ai.usage.input_tokens': expect.any(Number),
      'gen_ai.usage.output_tokens': expect.any(Number),
    });
    // and the HTTP request to the model under it: the stub's address, no query, no headers
    const http = spans.find(
      (s) => s.kind === CLIENT && String(s.attributes['url.full']).startsWith(stub.baseURL),
    );
    expect(http).toBeDefined();

    // on to the end step: its webhook (a URL with a key in its query) is an HTTP client span
    await turnTo('Ada');
    await turnTo('1815');
    const last = await turnTo('I want to book, yes please');
    expect(last.body.ended).toBe(true);
    const isWebhook = (x: ReceivedSpan) => String(x.attributes['url.full'] ?? '').includes('/unreachable');
    const webhook = await vi.waitFor(
      () => {
        const found = receiver.spans().find(isWebhook);
        if (!found) throw new Error('no webhook span');
        return found;
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(webhook.attributes['url.full']).toBe(`http://127.0.0.1:${closedPort}/unreachable`);
    expect(webhook.kind).toBe(CLIENT);

    // LiveKit's session span is exported when the session stops
    const stopped = await json(
      stack.base,
      'DELETE',
      `/api/agents/${created.body.id}/text-sessions/${started.body.sessionId}`,
    );
    expect(stopped.status).toBeLessThan(300);
    await spansOf(receiver, sessionTrace, (s) => s.some((x) => x.name === 'agent_session'));
    const chain = ancestors(
      model,
      receiver.spans().filter((s) => s.traceId === sessionTrace),
    );
    expect(chain.map((s) => s.name)).toEqual(
      expect.arrayContaining(['agent_turn', 'agent_session', 'process playground.text.start']),
    );
    expect(chain.at(-1)).toMatchObject({ service: 'gateway', parentSpanId: startSpan });

    // let every process export what it holds, then look at every byte that left: a check of absence, with
    // nothing to poll for, so a fixed wait
    await new Promise((r) => setTimeout(r, 500));
    const exported = Buffer.concat(receiver.raw()).toString('latin1');
    expect(exported).toContain('gen_ai.request.model');
    expect(exported).not.toContain(KEY);
    expect(exported).not.toContain('flow-secret-in-query');
    // no flow content or transcript by default: the user's words and the model's answer stay out
    expect(exported).not.toContain('I want to book');
    expect(exported).not.toContain('ok: Hi');
    expect(receiver.contentTypes().some((t) => t.includes('json'))).toBe(true);
    expect(receiver.contentTypes().some((t) => t.includes('protobuf'))).toBe(true);
  });

  it('log lines of a traced request carry its trace id and the one request id field, in every service', async () => {
    const created = await json(stack.base, 'POST', '/api/agents', { name: 'Logged' });
    const traceId = hex(16);
    await json(
      stack.base,
      'PATCH',
      `/api/agents/${created.body.id}`,
      { name: 'L2' },
      {
        traceparent: traceparentOf(traceId, hex(8)),
        'x-request-id': 'logged-on-1',
      },
    );
    const access = await waitForLine(stack.procs.gateway, 'requestId', 'logged-on-1', 'request completed');
    expect(access.trace_id).toBe(traceId);
    const updated = await waitForLine(stack.procs.agents, 'requestId', 'logged-on-1', 'agent updated');
    expect(updated.trace_id).toBe(traceId);
    expect(updated.span_id).toMatch(/^[0-9a-f]{16}$/);
  });
});

function waitForLine(p: ServiceProcess, field: string, value: string, msg: string) {
  return vi.waitFor(
    () => {
      const line = linesWith(p, field, value).find((l) => l.msg === msg);
      if (!line) throw new Error(`no "${msg}" line with ${field}=${value}:\n${p.output().slice(-2000)}`);
      return line;
    },
    { timeout: 5000, interval: 50 },
  );
}

describe('tracing off', () => {
  beforeAll(requireBuilt);
  let stack: Running;
  beforeAll(async () => {
    stack = await startProcesses(() => ({}));
  }, 90_000);
  afterAll(async () => {
    await stack?.close();
  });

  it("a caller's trace id is on the log lines of its request all the same, with the one request id field", async () => {
    const created = await json(stack.base, 'POST', '/api/agents', { name: 'Off' });
    const traceId = hex(16);
    const res = await json(
      stack.base,
      'PATCH',
      `/api/agents/${created.body.id}`,
      { name: 'Off 2' },
      {
        traceparent: traceparentOf(traceId, hex(8)),
        'x-request-id': 'logged-off-1',
      },
    );
    expect(res.status).toBe(200);
    const access = await waitForLine(stack.procs.gateway, 'requestId', 'logged-off-1', 'request completed');
    expect(access.trace_id).toBe(traceId);
    const updated = await waitForLine(stack.procs.agents, 'requestId', 'logged-off-1', 'agent updated');
    expect(updated.trace_id).toBe(traceId);
    // and a malformed one is no error
    const bad = await json(
      stack.base,
      'PATCH',
      `/api/agents/${created.body.id}`,
      { name: 'Off 3' },
      {
        traceparent: 'garbage',
      },
    );
    expect(bad.status).toBe(200);
  });
});

describe('a bad OTEL_* setting', () => {
  beforeAll(requireBuilt);
  it.each([
    ['gateway', 'OTEL_TRACES_SAMPLER', 'sometimes'],
    ['agents', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['playground', 'OTEL_TRACES_SAMPLER_ARG', '2'],
    ['sessions', 'OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
  ])('%s with %s=%s stops at start, with one line naming it', async (svc, name, value) => {
    const p = spawnService(svc, { [name]: value, NATS_URL: 'nats://127.0.0.1:1' });
    expect(await p.exited).toBe(1);
    const lines = p.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^${svc}: invalid configuration: ${name}\\b`));
  });
});

const MCP_TOKEN = 'mcp-token-never-exported-5151';

/** Calls `lookup_order` when asked about order 42, then says what the tool answered. */
function toolScript(req: ChatRequest) {
  const last = req.messages.at(-1);
  if (last?.role === 'tool') return { content: `Here is what I found: ${textOf(last.content)}` };
  const tools = (req.tools ?? []).map((t) => t.function.name);
  if (lastUserText(req).includes('order 42') && tools.includes('lookup_order')) {
    return { toolCalls: [{ name: 'lookup_order', args: { orderId: '42' } }] };
  }
  return { content: `ok: ${lastUserText(req)}` };
}

describe('an in-process stack (every service in the test process)', () => {
  it('traces the same path (the Redis instrumentation reaches an ioredis loaded before tracing started), and MCP tool calls', async () => {
    const receiver = await startOtlpReceiver();
    const tracing = startTracing(
      'stack',
      loadConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50' }),
    );
    const stack = await startStack({ tracing });
    const mcp = await startMcpServer({ transport: 'streamable', token: MCP_TOKEN });
    const stub = await startOpenAiStub(toolScript);
    try {
      const created = await json(stack.baseUrl, 'POST', '/api/agents', { name: 'In process' });
      const traceId = hex(16);
      const clientSpanId = hex(8);
      const res = await json(
        stack.baseUrl,
        'PATCH',
        `/api/agents/${created.body.id}`,
        { name: 'P2' },
        {
          traceparent: traceparentOf(traceId, clientSpanId),
        },
      );
      expect(res.status).toBe(200);
      const spans = await spansOf(
        receiver,
        traceId,
        (s) =>
          s.some((x) => x.attributes['db.system'] === 'redis') &&
          s.some((x) => x.name === 'PATCH /api/agents/:id') &&
          s.some((x) => x.name === 'process agents.update'),
      );
      const route = spans.find((s) => s.name === 'PATCH /api/agents/:id')!;
      expect(route.parentSpanId).toBe(clientSpanId);
      const handler = spans.find((s) => s.name === 'process agents.update')!;
      expect(ancestors(handler, spans)).toContain(route);
      for (const r of spans.filter((s) => s.attributes['db.system'] === 'redis')) {
        expect(r.parentSpanId).toBe(handler.spanId);
      }

      // an MCP tool call in a text session: our MCP client span, in the session's trace under LiveKit's turn
      const flow = withEdge(
        {
          ...withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }),
          nodes: [
            ...withNode(fullFlow(), 'llm', { baseURL: stub.baseURL, model: 'stub' }).nodes,
            {
              id: 'orders',
              nodeType: 'mcp',
              serverUrl: `${mcp.url}?key=mcp-query-secret`,
              authType: 'bearer',
              authValue: MCP_TOKEN,
              selectedTools: ['lookup_order'],
            },
          ],
        },
        'orders',
        'output',
        'agent',
        'tools_in',
      );
      const shop = await json(stack.baseUrl, 'POST', '/api/agents', { name: 'Shop', flow });
      expect(shop.status).toBe(201);
      const sessionTrace = hex(16);
      const started = await json(
        stack.baseUrl,
        'POST',
        `/api/agents/${shop.body.id}/text-sessions`,
        { apiKeys: { openai: KEY } },
        { traceparent: traceparentOf(sessionTrace, hex(8)) },
      );
      expect(started.status).toBe(201);
      const turn = await json(
        stack.baseUrl,
        'POST',
        `/api/agents/${shop.body.id}/text-sessions/${started.body.sessionId}/turns`,
        { text: 'Where is order 42?' },
      );
      expect(turn.body.replies.join(' ')).toContain('Order 42 ships on Tuesday.');
      // LiveKit's turn span ends (and is exported) after the tool call in it
      const isCall = (x: ReceivedSpan) => x.name === 'tools/call lookup_order';
      const sessionSpans = await spansOf(receiver, sessionTrace, (s) =>
        s.some((x) => isCall(x) && ancestors(x, s).some((a) => a.name === 'agent_turn')),
      );
      const call = sessionSpans.find((x) => x.name === 'tools/call lookup_order')!;
      expect(call.kind).toBe(CLIENT);
      expect(call.attributes).toMatchObject({
        'mcp.method.name': 'tools/call',
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 'lookup_order',
        'server.address': '127.0.0.1',
      });
      expect(ancestors(call, sessionSpans).map((s) => s.name)).toContain('agent_turn');
      // a check of absence below (no secret exported): nothing to poll for, so a fixed wait for the exports
      await new Promise((r) => setTimeout(r, 300));
      const exported = Buffer.concat(receiver.raw()).toString('latin1');
      expect(exported).not.toContain(MCP_TOKEN);
      expect(exported).not.toContain(KEY);
      expect(exported).not.toContain('mcp-query-secret');
      expect(exported).not.toContain('ships on Tuesday');
    } finally {
      await stub.close();
      await mcp.close();
      await stack.close();
      await tracing.shutdown();
      await receiver.close();
    }
  });
});
