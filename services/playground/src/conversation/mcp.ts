import { safeError } from '@vab/bus';
import { llm } from '@livekit/agents';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ToolMock } from '@vab/contracts';
import type { McpConfig } from '@vab/flow';
import type { Logger } from 'pino';
import type { EgressFetch } from '../egress/client.js';

export interface McpOptions {
  fetch: EgressFetch;
  /** Bound on connecting, listing and each tool call. */
  timeoutMs: number;
  log: Logger;
  /** Told of every call the model makes (the session's events, the turn's tool time). */
  observer?: ToolObserver;
}

/** Watches tool calls: `called` when one starts, the function it returns when it has its outcome. */
export interface ToolObserver {
  called(name: string, args: unknown): (outcome: { result: string } | { error: string }) => void;
}

/** A tool result longer than this reaches the model cut, with a note: one call must not flood its context. */
const MAX_RESULT_CHARS = 16_000;
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const ANY_ARGUMENTS = { type: 'object', properties: {}, additionalProperties: true } as const;

type McpTool = Awaited<ReturnType<Client['listTools']>>['tools'][number];
type CallResult = Awaited<ReturnType<Client['callTool']>>;

const tracer = trace.getTracer('@vab/playground');

const hostOf = (url: string): string => {
  try {
    return new URL(url).hostname;
  } catch {
    return '';
  }
};

function authHeaders(cfg: McpConfig): Record<string, string> {
  if (!cfg.authValue || cfg.authType === 'none') return {};
  return cfg.authType === 'bearer'
    ? { authorization: `Bearer ${cfg.authValue}` }
    : { 'x-api-key': cfg.authValue };
}

/** The text the model gets from a tool result: its text parts, else its structured content as JSON. */
function resultText(result: CallResult): string {
  const parts = (Array.isArray(result.content) ? result.content : []) as { type: string; text?: string }[];
  const texts = parts.map((p) => (p.type === 'text' ? (p.text ?? '') : `[${p.type}]`));
  let text = texts.join('\n');
  if (text.trim() === '' && result.structuredContent !== undefined) {
    text = JSON.stringify(result.structuredContent);
  }
  return text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}\n[result cut]` : text;
}

/**
 * One MCP node's server: connected with the official SDK (streamable HTTP, then SSE for older servers),
 * through the egress-checked fetch, with the node's auth header. A server that cannot be reached now is
 * tried again on the next call; every failure reaches the model as the tool's error, never the session.
 */
class McpServer {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private closed = false;

  constructor(
    private readonly cfg: McpConfig,
    private readonly opts: McpOptions,
  ) {}

  connect(): Promise<Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.open().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async open(): Promise<Client> {
    const url = new URL(this.cfg.serverUrl);
    const requestInit = { headers: authHeaders(this.cfg) };
    const attempt = async (transport: StreamableHTTPClientTransport | SSEClientTransport) => {
      const client = new Client({ name: 'voice-agent-builder', version: '1' });
      try {
        await client.connect(transport, { timeout: this.opts.timeoutMs });
        return client;
      } catch (err) {
        await client.close().catch(() => undefined);
        throw err;
      }
    };
    let client: Client;
    try {
      client = await attempt(new StreamableHTTPClientTransport(url, { requestInit, fetch: this.opts.fetch }));
    } catch (err) {
      // the SDK's documented fallback for servers that predate streamable HTTP
      this.opts.log.debug({ nodeId: this.cfg.nodeId, err: safeError(err) }, 'mcp: trying sse');
      client = await attempt(new SSEClientTransport(url, { requestInit, fetch: this.opts.fetch }));
    }
    if (this.closed) {
      await client.close().catch(() => undefined);
      throw new Error('the session has ended');
    }
    // a dropped connection (the server restarted, an answer cut off) is made again by the next call
    client.onclose = () => {
      if (this.client === client) this.client = undefined;
    };
    this.client = client;
    return client;
  }

  async listSelected(): Promise<McpTool[]> {
    const client = await this.connect();
    const { tools } = await client.listTools(undefined, { timeout: this.opts.timeoutMs });
    return tools.filter((t) => this.cfg.selectedTools.includes(t.name));
  }

  private async callOnce(name: string, args: Record<string, unknown>): Promise<CallResult> {
    const client = await this.connect();
    return client.callTool({ name, arguments: args }, undefined, { timeout: this.opts.timeoutMs });
  }

  /**
   * One tool call, as the MCP semantic conventions trace it (`tools/call <tool>`, a client span under
   * LiveKit's `function_tool`): the tool's name and outcome, never its arguments or result, and the
   * server's host without its path or query (a flow's URL may carry a key).
   */
  async call(name: string, args: Record<string, unknown>): Promise<string> {
    return tracer.startActiveSpan(`tools/call ${name}`, { kind: SpanKind.CLIENT }, async (span) => {
      if (span.isRecording()) {
        span.setAttributes({
          'mcp.method.name': 'tools/call',
          'gen_ai.operation.name': 'execute_tool',
          'gen_ai.tool.name': name,
          'server.address': hostOf(this.cfg.serverUrl),
        });
      }
      try {
        return await this.callTraced(name, args);
      } catch (err) {
        span.setAttribute('error.type', err instanceof llm.ToolError ? 'tool_error' : 'error');
        span.setStatus({ code: SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    });
  }

  private async callTraced(name: string, args: Record<string, unknown>): Promise<string> {
    let result: CallResult;
    try {
      result = await this.callOnce(name, args).catch(async (err: unknown) => {
        // An answer of the server's (an error, a timeout) may come after the tool ran: never sent twice.
        // A failure of the connection itself (a stale session, a reset) is: once, on a new connection.
        if (err instanceof McpError) throw err;
        await this.reset();
        return this.callOnce(name, args);
      });
    } catch (err) {
      this.opts.log.warn(
        { code: 'MCP_TOOL_FAILED', nodeId: this.cfg.nodeId, tool: name, err: safeError(err) },
        'mcp tool call failed',
      );
      throw new llm.ToolError(`the tool ${name} is unavailable right now`);
    }
    const text = resultText(result);
    if (result.isError) throw new llm.ToolError(text || `the tool ${name} failed`);
    return text;
  }

  private async reset(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    await client?.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.reset();
  }
}

/** A mocked tool's answer, as a server's would reach the model: text as is, other values as JSON. */
function mockResult(name: string, mock: ToolMock): string {
  if (mock.error !== undefined) throw new llm.ToolError(mock.error);
  const text = typeof mock.result === 'string' ? mock.result : JSON.stringify(mock.result ?? null);
  return text.length > MAX_RESULT_CHARS
    ? `${text.slice(0, MAX_RESULT_CHARS)}\n[result cut]`
    : text || `${name}: done`;
}

export interface McpTools {
  /** The selected tools of every MCP node, as the model sees them. */
  tools: llm.FunctionTool[];
  close(): Promise<void>;
}

/**
 * The tools of a flow's MCP nodes. Each server is asked for its tools at once (in parallel, bounded); only
 * the node's `selectedTools` are exposed. A server that does not answer still gets its selected tools
 * exposed, taking any arguments, so the model that calls one learns that it is unavailable.
 */
export async function openMcpTools(
  configs: McpConfig[],
  opts: McpOptions,
  mocks: Readonly<Record<string, ToolMock>> = {},
): Promise<McpTools> {
  const servers = configs.map((cfg) => new McpServer(cfg, opts));
  const mocked = (name: string) => Object.hasOwn(mocks, name);
  const listed = await Promise.all(
    servers.map((s, i) =>
      // a server whose every selected tool a test case mocks is never contacted, not even to list them
      configs[i]!.selectedTools.every(mocked)
        ? Promise.resolve(undefined)
        : s.listSelected().catch((err: unknown) => {
            opts.log.warn(
              { code: 'MCP_SERVER_UNREACHABLE', nodeId: configs[i]!.nodeId, err: safeError(err) },
              'mcp server not reachable',
            );
            return undefined;
          }),
    ),
  );
  const taken = new Set<string>();
  const tools: llm.FunctionTool[] = [];
  servers.forEach((server, i) => {
    const cfg = configs[i]!;
    const found = listed[i];
    for (const name of cfg.selectedTools) {
      const described = found?.find((t) => t.name === name);
      if (found && !described) {
        opts.log.warn(
          { code: 'MCP_TOOL_MISSING', nodeId: cfg.nodeId, tool: name },
          'mcp server has no such tool',
        );
        continue;
      }
      // names the model API accepts, unique across servers
      let exposed = name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 60) || 'tool';
      for (let n = 2; taken.has(exposed); n++) exposed = `${exposed.slice(0, 60)}_${n}`;
      if (!TOOL_NAME.test(exposed)) continue;
      taken.add(exposed);
      tools.push(
        llm.tool({
          name: exposed,
          description: described?.description || `The ${name} tool of an MCP server.`,
          parameters: (described?.inputSchema ?? ANY_ARGUMENTS) as never,
          execute: async (args: Record<string, unknown>) => {
            const done = opts.observer?.called(exposed, args ?? {});
            try {
              const result = mocked(name)
                ? mockResult(name, mocks[name]!)
                : await server.call(name, args ?? {});
              done?.({ result });
              return result;
            } catch (err) {
              done?.({ error: err instanceof Error ? err.message : String(err) });
              throw err;
            }
          },
        }) as unknown as llm.FunctionTool,
      );
    }
  });
  return { tools, close: async () => void (await Promise.all(servers.map((s) => s.close()))) };
}
