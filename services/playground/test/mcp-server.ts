import { listenOnLoopback } from '@vab/testkit';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { z } from 'zod';

export interface McpCall {
  tool: string;
  args: Record<string, unknown>;
  authorization: string | undefined;
}

/**
 * A real MCP server, built with the official SDK, on loopback: `lookup_order` answers where an order is,
 * `delete_everything` is there to prove unselected tools never reach the model. `transport` picks streamable
 * HTTP (stateless) or the older SSE protocol; `token` is the bearer token it requires.
 * `resultChars` makes `lookup_order`'s answer that long.
 */
export async function startMcpServer(opts: {
  transport: 'streamable' | 'sse';
  token: string;
  /** `lookup_order` answers a text of this many characters (a server answering more than it should). */
  resultChars?: number;
}) {
  const calls: McpCall[] = [];
  /** Every HTTP request it got, of any kind (a tool list or a handshake too). */
  const requests = { count: 0 };
  let authorization: string | undefined;
  const mcp = () => {
    const server = new McpServer({ name: 'orders', version: '1.0.0' });
    server.registerTool(
      'lookup_order',
      { description: 'Where an order is.', inputSchema: { orderId: z.string() } },
      async ({ orderId }) => {
        calls.push({ tool: 'lookup_order', args: { orderId }, authorization });
        const text = opts.resultChars ? 'x'.repeat(opts.resultChars) : `Order ${orderId} ships on Tuesday.`;
        return { content: [{ type: 'text' as const, text }] };
      },
    );
    server.registerTool('delete_everything', { description: 'Deletes every order.' }, async () => {
      calls.push({ tool: 'delete_everything', args: {}, authorization });
      return { content: [{ type: 'text' as const, text: 'deleted' }] };
    });
    return server;
  };
  const sse = new Map<string, SSEServerTransport>();
  const body = async (req: IncomingMessage) => {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    return raw ? (JSON.parse(raw) as unknown) : undefined;
  };
  const http: Server = createServer((req, res) => {
    void (async () => {
      requests.count++;
      authorization = req.headers.authorization;
      if (authorization !== `Bearer ${opts.token}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
        return;
      }
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (opts.transport === 'streamable') {
        if (req.method !== 'POST') {
          res.writeHead(405).end();
          return;
        }
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        const server = mcp();
        res.on('close', () => void transport.close().then(() => server.close()));
        await server.connect(transport);
        await transport.handleRequest(req, res, await body(req));
        return;
      }
      // the older protocol: an event stream on GET, messages POSTed to the endpoint it announces
      if (req.method === 'GET' && url.pathname === '/mcp') {
        const transport = new SSEServerTransport('/messages', res);
        sse.set(transport.sessionId, transport);
        res.on('close', () => sse.delete(transport.sessionId));
        await mcp().connect(transport);
        return;
      }
      const transport = sse.get(url.searchParams.get('sessionId') ?? '');
      if (req.method === 'POST' && url.pathname === '/messages' && transport) {
        await transport.handlePostMessage(req, res, await body(req));
        return;
      }
      res.writeHead(404).end();
    })();
  });
  const port = await listenOnLoopback(http);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    requests,
    /** Cuts every open connection (an SSE stream included), as a restart of the server would. */
    dropConnections: () => http.closeAllConnections(),
    close: async () => {
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    },
  };
}
