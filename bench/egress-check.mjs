#!/usr/bin/env node
// What the connect-time egress check adds to a model call: the same small chat-completions POST to a local
// endpoint through undici's fetch with a plain Agent (A) and through the playground's egress-checked fetch
// (B), alternately, same host name, same timeouts. Two cases: kept-alive connections (how the model
// client runs: the check runs once per connection) and a new connection per call (`connection: close`:
// the check — the resolver's lookup and the policy — runs on every call, against a warm DNS cache).
// Prints p50 / p90 per side and the p50 difference.
// Usage: npm run build && node bench/egress-check.mjs [--calls 2000] [--host localhost]
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pino } from 'pino';
import { Agent, fetch as undiciFetch } from 'undici';
import { option } from './processes.mjs';
import { root as here } from './lib/figures.mjs';

const dist = (p) => join(here, 'services', 'playground', 'dist', p);
const { createEgressFetch } = await import(dist('egress/client.js'));
const { EgressPolicy, parseAllowList } = await import(dist('egress/policy.js'));

const CALLS = option('calls', 2000);
const HOST = option('host', 'localhost');
const ANSWER = JSON.stringify({
  id: 'x',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
});
const BODY = JSON.stringify({ model: 'stub', messages: [{ role: 'user', content: 'Hello there' }] });

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(ANSWER));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://${HOST}:${server.address().port}/v1/chat/completions`;

const timeoutMs = 30_000;
const plain = (init) =>
  undiciFetch(url, {
    ...init,
    dispatcher: (plain.agent ??= new Agent({ headersTimeout: timeoutMs, bodyTimeout: timeoutMs })),
    redirect: 'manual',
  });
const checked = createEgressFetch({
  policy: new EgressPolicy(parseAllowList('127.0.0.1,::1')),
  timeoutMs,
  maxResponseBytes: 4 * 1024 * 1024,
  log: pino({ level: 'silent' }),
});

async function call(f, close) {
  const t0 = process.hrtime.bigint();
  const res = await f(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(close ? { connection: 'close' } : {}) },
    body: BODY,
  });
  await res.text();
  if (res.status !== 200) throw new Error(`answered ${res.status}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const pct = (xs, q) => [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(q * xs.length) - 1)];
const fmt = (v) => v.toFixed(3);

for (const close of [false, true]) {
  const a = [];
  const b = [];
  // warm-up: JIT, the connection pool, the resolver's cache
  for (let i = 0; i < 200; i++) {
    await call((u, i2) => plain(i2), close);
    await call(checked, close);
  }
  for (let i = 0; i < CALLS; i++) {
    a.push(await call((u, i2) => plain(i2), close));
    b.push(await call(checked, close));
  }
  const label = close ? 'new connection per call' : 'kept-alive connection';
  console.log(
    `${label}: plain p50 ${fmt(pct(a, 0.5))} ms p90 ${fmt(pct(a, 0.9))} ms | egress-checked p50 ${fmt(
      pct(b, 0.5),
    )} ms p90 ${fmt(pct(b, 0.9))} ms | added at p50 ${fmt(pct(b, 0.5) - pct(a, 0.5))} ms (${CALLS} calls each, host ${HOST})`,
  );
}
server.close();
await plain.agent?.close();
process.exit(0);
