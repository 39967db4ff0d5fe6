import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createEgressFetch,
  EgressRefused,
  MAX_EVENT_BYTES,
  overBoundMessage,
  type Resolver,
} from './client.js';
import { EgressPolicy, parseAllowList } from './policy.js';

const closed = new EgressPolicy([]);
const allowing = new EgressPolicy(parseAllowList('127.0.0.1, 10.1.0.0/16, hooks.internal, fd00:1::/32'));

describe('which URLs a flow may name (checked before anything runs)', () => {
  it.each([
    // [url, with nothing allowed, with the allow-list above]
    ['http://127.0.0.1/hook', 'refused', 'ok'],
    ['http://127.9.9.9/', 'refused', 'refused'],
    ['http://localhost:8080/', 'refused', 'ok'],
    ['http://api.localhost/', 'refused', 'ok'],
    ['http://10.0.0.7/', 'refused', 'refused'],
    ['http://10.1.200.3/', 'refused', 'ok'],
    ['http://172.16.4.4/', 'refused', 'refused'],
    ['http://172.31.255.255/', 'refused', 'refused'],
    ['http://192.168.1.10/', 'refused', 'refused'],
    ['http://169.254.169.254/latest/meta-data/', 'refused', 'refused'],
    ['http://0.0.0.0:6379/', 'refused', 'refused'],
    ['http://224.0.0.251/', 'refused', 'refused'],
    ['http://100.64.0.1/', 'refused', 'refused'],
    ['http://2130706433/', 'refused', 'ok'], // 127.0.0.1 as one number
    ['http://0x7f.1/', 'refused', 'ok'], // 127.0.0.1 in hex, short form
    ['http://017700000001/', 'refused', 'ok'], // 127.0.0.1 in octal
    ['http://[::1]/', 'refused', 'refused'],
    ['http://[::]/', 'refused', 'refused'],
    ['http://[fe80::1]/', 'refused', 'refused'],
    ['http://[fc00::1]/', 'refused', 'refused'],
    ['http://[fd00:1:2::3]/', 'refused', 'ok'],
    ['http://[ff02::1]/', 'refused', 'refused'],
    ['http://[::ffff:127.0.0.1]/', 'refused', 'ok'],
    ['http://[::ffff:a9fe:a9fe]/', 'refused', 'refused'], // 169.254.169.254, mapped
    ['http://[::ffff:10.1.0.9]/', 'refused', 'ok'],
    ['http://[64:ff9b::a00:1]/', 'refused', 'refused'], // NAT64 form of 10.0.0.1
    // embedded IPv4 forms are judged by the IPv4 address inside (issue 35 #4)
    ['http://[::127.0.0.1]/', 'refused', 'ok'], // IPv4-compatible ::/96
    ['http://[::169.254.169.254]/', 'refused', 'refused'],
    ['http://[::a00:7]/', 'refused', 'refused'], // ::10.0.0.7
    ['http://[::ffff:0:7f00:1]/', 'refused', 'ok'], // IPv4-translated 127.0.0.1
    ['http://[64:ff9b::7f00:1]/', 'refused', 'ok'], // NAT64 of 127.0.0.1
    ['http://[64:ff9b::808:808]/', 'ok', 'ok'], // NAT64 of 8.8.8.8: a public address
    ['http://[64:ff9b:1::a00:1]/', 'refused', 'refused'], // NAT64 local-use prefix: never
    ['http://[2002:a9fe:a9fe::1]/', 'refused', 'refused'], // 6to4 of 169.254.169.254
    ['http://[2002:7f00:1::]/', 'refused', 'ok'], // 6to4 of 127.0.0.1
    ['http://[2002:808:808::1]/', 'ok', 'ok'], // 6to4 of 8.8.8.8
    ['http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/', 'refused', 'refused'], // Teredo: never
    ['http://8.8.8.8/', 'ok', 'ok'],
    ['http://[2001:4860:4860::8888]/', 'ok', 'ok'],
    ['http://[::ffff:8.8.8.8]/', 'ok', 'ok'],
    ['https://hooks.example.com/x', 'ok', 'ok'], // a name: checked again when connecting
    ['https://hooks.internal/x', 'ok', 'ok'],
    ['ftp://example.com/', 'malformed', 'malformed'],
    ['not a url', 'malformed', 'malformed'],
  ])('%s: %s, %s with FLOW_EGRESS_ALLOW', (url, bare, allowed) => {
    const verdict = (p: EgressPolicy) => {
      const v = p.checkUrl(url);
      if (v.ok) return 'ok';
      return /FLOW_EGRESS_ALLOW/.test(v.reason) ? 'refused' : 'malformed';
    };
    expect(verdict(closed)).toBe(bare);
    expect(verdict(allowing)).toBe(allowed);
  });

  it('lets an allow-listed host name reach any address it resolves to, and nothing else', () => {
    expect(allowing.permits('hooks.internal', '10.9.9.9')).toBe(true);
    expect(allowing.permits('HOOKS.internal.', '10.9.9.9')).toBe(true);
    expect(allowing.permits('other.internal', '10.9.9.9')).toBe(false);
    expect(allowing.permits('other.internal', '10.1.9.9')).toBe(true);
  });

  it.each(['not a host!', '10.0.0.0/99', 'http://x', '1.2.3.4/-1'])(
    'refuses the allow-list entry %j',
    (entry) => {
      expect(() => parseAllowList(entry)).toThrow(entry);
    },
  );
});

// ---- at connect time, against a real server on loopback ----

const hits: string[] = [];
let server: Server;
let port = 0;

function handler(req: IncomingMessage, res: ServerResponse): void {
  hits.push(`${req.headers.host} ${req.url}`);
  if (req.url === '/redirect') {
    res.writeHead(302, { location: `http://127.0.0.1:${port}/internal` }).end();
  } else if (req.url === '/big') {
    res.writeHead(200).end(Buffer.alloc(64 * 1024, 'x'));
  } else if (req.url === '/big-chunked') {
    // no content-length: the bound is met while reading
    res.writeHead(200);
    for (let i = 0; i < 8; i++) res.write(Buffer.alloc(8 * 1024, 'x'));
    res.end();
  } else if (req.url?.startsWith('/events')) {
    // one event of `size` bytes between small ones, written in 16 KB pieces
    const size = Number(new URL(req.url, 'http://x').searchParams.get('size'));
    const sep = new URL(req.url, 'http://x').searchParams.get('sep') === 'crlf' ? '\r\n\r\n' : '\n\n';
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < 100; i++) res.write(`data: {"n":${i}}${sep}`);
    const big = Buffer.alloc(size, 'y');
    res.write('data: ');
    for (let at = 0; at < big.length; at += 16 * 1024) res.write(big.subarray(at, at + 16 * 1024));
    res.end(`${sep}data: [DONE]${sep}`);
  } else if (req.url === '/slow') {
    setTimeout(() => res.writeHead(200).end('late'), 1500);
  } else {
    res.writeHead(200, { connection: 'close' }).end('ok');
  }
}

beforeAll(async () => {
  server = createServer(handler);
  // every loopback address (127.0.0.1 and 127.0.0.2 alike)
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', () => r()));
  const addr = server.address();
  port = typeof addr === 'object' && addr ? addr.port : 0;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

const log = pino({ level: 'silent' });
const names =
  (table: Record<string, string>): Resolver =>
  async (host) => {
    const address = table[host];
    if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return [{ address, family: address.includes(':') ? 6 : 4 }];
  };
const client = (
  allow: string,
  resolve: Resolver,
  extra: { timeoutMs?: number; maxResponseBytes?: number } = {},
) =>
  createEgressFetch({
    policy: new EgressPolicy(parseAllowList(allow)),
    timeoutMs: extra.timeoutMs ?? 5000,
    maxResponseBytes: extra.maxResponseBytes ?? 1024 * 1024,
    log,
    resolve,
  });

async function refusal(p: Promise<unknown>): Promise<EgressRefused> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  const cause = (err as { cause?: unknown } | undefined)?.cause;
  expect(cause).toBeInstanceOf(EgressRefused);
  return cause as EgressRefused;
}

describe('the egress client, when it connects', () => {
  it('refuses a name that resolves inside, before a byte is sent', async () => {
    const before = hits.length;
    const f = client('', names({ 'inside.test': '127.0.0.1' }));
    const refused = await refusal(f(`http://inside.test:${port}/hook`));
    expect(refused.range).toBe('loopback');
    expect(hits.length).toBe(before);
  });

  it('connects when the operator allowed the address the name resolves to', async () => {
    const f = client('127.0.0.1', names({ 'inside.test': '127.0.0.1' }));
    const res = await f(`http://inside.test:${port}/hook`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(200);
    expect(hits.at(-1)).toBe(`inside.test:${port} /hook`);
  });

  it('checks every connection against what the name resolves to then (DNS rebinding)', async () => {
    const table: Record<string, string> = { 'rebind.test': '127.0.0.2' };
    const f = client('127.0.0.2', names(table));
    expect((await f(`http://rebind.test:${port}/first`)).status).toBe(200);
    table['rebind.test'] = '127.0.0.1'; // the name now points elsewhere inside
    const before = hits.length;
    await refusal(f(`http://rebind.test:${port}/second`));
    expect(hits.length).toBe(before);
  });

  it.each([
    ['127.0.0.1', 'loopback'],
    ['[::1]', 'loopback'],
    ['[::ffff:127.0.0.1]', 'loopback'],
  ])('refuses the address %s written in the URL', async (host, range) => {
    const before = hits.length;
    const refused = await refusal(client('', names({}))(`http://${host}:${port}/`));
    expect(refused.range).toBe(range);
    expect(hits.length).toBe(before);
  });

  it('does not follow a redirect: the 302 is the answer', async () => {
    const f = client('127.0.0.1', names({}));
    const res = await f(`http://127.0.0.1:${port}/redirect`);
    expect(res.status).toBe(302);
    await res.body?.cancel();
    expect(hits).not.toContain(`127.0.0.1:${port} /internal`);
  });

  it.each(['/big', '/big-chunked'])(
    'cuts off an answer larger than the bound (%s), saying so in the error',
    async (path) => {
      const f = client('127.0.0.1', names({}), { maxResponseBytes: 16 * 1024 });
      const res = await f(`http://127.0.0.1:${port}${path}`);
      expect(res.status).toBe(200);
      const err = await res.text().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(overBoundMessage(err)).toBe("the answer was over the server's 16384-byte bound");
      const ok = await client('127.0.0.1', names({}))(`http://127.0.0.1:${port}${path}`);
      expect((await ok.text()).length).toBe(64 * 1024);
    },
  );

  it.each(['lf', 'crlf'])(
    'cuts off one event of an event stream larger than its bound (%s), counted across chunks',
    async (sep) => {
      const f = client('127.0.0.1', names({}), { maxResponseBytes: 4 * MAX_EVENT_BYTES });
      const read = (size: number) =>
        f(`http://127.0.0.1:${port}/events?size=${size}&sep=${sep}`).then((r) => r.text());
      // 100 small events and one of the bound, `data: ` included, pass; one over it (its blank line aside) does not
      expect(await read(MAX_EVENT_BYTES - 'data: '.length)).toContain('[DONE]');
      const err = await read(MAX_EVENT_BYTES - 'data: '.length + 4).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as Error).message).toBe(
        `one event of the streamed answer was over the server's ${MAX_EVENT_BYTES}-byte bound`,
      );
    },
  );

  it('gives up on an answer slower than the bound', async () => {
    const f = client('127.0.0.1', names({}), { timeoutMs: 200 });
    await expect(f(`http://127.0.0.1:${port}/slow`)).rejects.toThrow();
  });
});
