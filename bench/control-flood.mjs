#!/usr/bin/env node
// A flood of the voice socket's control messages (issue 48): one client sends valid `playback_finished`
// messages as fast as its connection takes them, on its own session's socket, and goes on writing them after
// the server closes it (a hostile client ignores the close); meanwhile another caller starts voice sessions one
// after another. Printed: that caller's start (POST → 201) and start → `ready` (POST → the socket's first
// message), p50/p99, quiet and under the flood, with the gateway's and the playground's CPU in each phase, and
// what the flooder got (messages written, the close code). Gateway, playground, agents and sessions are
// processes of their own; the flooder too; the stubs too (bench/voice-stubs.mjs).
// Usage: npm run build && node bench/control-flood.mjs [--probes 20] [--root <a built checkout>]
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startLocalNats, startLocalRedis, stopOnExit, voiceFlow } from '@vab/testkit';
import WebSocket from 'ws';
import { option, sendJson, startCore, startProcess, startVoiceStubs, usage } from './processes.mjs';
import { pct } from './lib/figures.mjs';

const here = dirname(fileURLToPath(import.meta.url));

// ---- the flooder (this file run with --flood <ws url>) -------------------------------------------------------
if (process.argv.includes('--flood')) {
  // a client of its own over TCP (no WebSocket library to answer the server's close for it): the upgrade, then,
  // once the server said `ready`, masked text frames (a zero mask leaves the bytes as they are), 1,000 per write,
  // for as long as the connection takes them
  const url = new URL(option('flood', ''));
  const tcp = connect(Number(url.port), url.hostname);
  tcp.on('error', () => undefined);
  tcp.write(
    `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
  );
  let heard = Buffer.alloc(0);
  tcp.on('data', (d) => (heard = Buffer.concat([heard, d]).subarray(-65536)));
  while (!heard.includes('"type":"ready"')) {
    if (tcp.destroyed) throw new Error(`no ready: ${heard.toString('latin1').slice(0, 200)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  const text = Buffer.from(JSON.stringify({ type: 'playback_finished', playedMs: 0, interrupted: false }));
  const frame = Buffer.concat([Buffer.from([0x81, 0x80 | text.length, 0, 0, 0, 0]), text]);
  const batch = Buffer.concat(Array.from({ length: 1000 }, () => frame));
  let written = 0;
  let stopped = false;
  process.on('SIGTERM', () => (stopped = true));
  while (!stopped && !tcp.destroyed) {
    written += 1000;
    if (!tcp.write(batch)) await new Promise((r) => (tcp.once('drain', r), tcp.once('close', r)));
    // the event loop runs between batches: SIGTERM and the close are seen
    await new Promise((r) => setTimeout(r, 0));
  }
  // the server's close frame, if it sent one: the last bytes it sent (0x88, length, 2-byte code, reason)
  const at = heard.lastIndexOf(0x88);
  const closing = at >= 0 && at + 2 + heard[at + 1] === heard.length && heard[at + 1] >= 2;
  const close = closing ? heard.readUInt16BE(at + 2) : null;
  const reason = closing ? heard.subarray(at + 4).toString() : null;
  console.log(JSON.stringify({ written, close, reason }));
  tcp.destroy();
  process.exit(0);
}

// ---- the benchmark -------------------------------------------------------------------------------------------
const root = option('root', join(here, '..'));
const PROBES = option('probes', 20);

const nats = await startLocalNats();
const redis = await startLocalRedis();
const stubs = await startVoiceStubs(join(here, '..'));
const env = { NATS_URL: nats.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn', FLOW_EGRESS_ALLOW: '127.0.0.1' };
const { url: base, procs, gateway } = await startCore(root, env, { SESSION_RATE_LIMIT_MAX: '1000000000' });
const playground = await startProcess(
  join(root, 'services/playground/dist/main.js'),
  { ...env, LOG_LEVEL: 'info', INSTANCE_ID: 'bench-1', MAX_SESSIONS: '50', MAX_SESSIONS_PER_CALLER: '0' },
  'playground instance up',
);
const cleanup = async () => {
  for (const p of [...procs, playground]) p.kill();
  stubs.close();
  await nats.stop();
  await redis.stop();
};

const flow = voiceFlow({ chatURL: stubs.chatURL, speechURL: stubs.speechURL });
const agent = await sendJson('POST', `${base}/api/agents`, { name: 'Flood bench', flow });
const start = () =>
  sendJson('POST', `${base}/api/agents/${agent.id}/voice-sessions`, { apiKeys: { openai: 'sk-bench' } });

/** One caller: its start, then its socket until `ready`; ms of each. */
async function probe() {
  const t0 = performance.now();
  const started = await start();
  const t1 = performance.now();
  const ws = new WebSocket(base.replace(/^http/, 'ws') + started.audioPath);
  await new Promise((resolve, reject) => {
    ws.on('message', (data, isBinary) => {
      if (!isBinary && JSON.parse(String(data)).type === 'ready') resolve();
    });
    ws.on('close', (code) => reject(new Error(`closed ${code} before ready`)));
  });
  const t2 = performance.now();
  ws.close();
  await new Promise((r) => ws.once('close', r));
  return { startMs: t1 - t0, readyMs: t2 - t0 };
}

/** PROBES callers one after another; the gateway's and the playground's CPU seconds meanwhile. */
async function phase() {
  const cpu0 = [gateway, playground].map((p) => usage(p.pid).cpuSeconds);
  const t0 = performance.now();
  const probes = [];
  const failures = [];
  for (let i = 0; i < PROBES; i++) {
    // a start refused or timed out is counted, not measured
    await probe().then(
      (p) => probes.push(p),
      (err) => failures.push(String(err.message).slice(0, 160)),
    );
  }
  const seconds = (performance.now() - t0) / 1000;
  const [gw, pg] = [gateway, playground].map((p, i) => usage(p.pid).cpuSeconds - cpu0[i]);
  return { probes, failures, seconds, gw, pg };
}

const row = (name, { probes, failures, seconds, gw, pg }) => {
  const s = probes.map((p) => p.startMs);
  const r = probes.map((p) => p.readyMs);
  return (
    `| ${name} | ${pct(s, 50).toFixed(0)} / ${pct(s, 99).toFixed(0)} | ${pct(r, 50).toFixed(0)} / ` +
    `${pct(r, 99).toFixed(0)} | ${failures.length} | ${gw.toFixed(1)} s | ${pg.toFixed(1)} s | ${seconds.toFixed(1)} s |`
  );
};

try {
  // warm-up: the first session loads the VAD and the end-of-turn model
  for (let i = 0; i < 3; i++) await probe();
  const quiet = await phase();
  const target = await start();
  const flooder = stopOnExit(
    spawn(
      process.execPath,
      [fileURLToPath(import.meta.url), '--flood', base.replace(/^http/, 'ws') + target.audioPath],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    ),
  );
  let floodOut = '';
  flooder.stdout.on('data', (d) => (floodOut += d));
  const floodDone = new Promise((r) => flooder.once('exit', r));
  // the flood is on before the first probe
  await new Promise((r) => setTimeout(r, 1000));
  const flooded = await phase();
  flooder.kill('SIGTERM');
  await floodDone;
  const flood = JSON.parse(floodOut.trim() || '{}');
  console.log(`# control-message flood: ${PROBES} callers one after another, quiet then under the flood`);
  console.log(
    `\n| phase | start p50 / p99 (ms) | start → ready p50 / p99 (ms) | failed | gateway CPU | playground CPU | wall |`,
  );
  console.log('|---|---|---|---|---|---|---|');
  console.log(row('quiet', quiet));
  console.log(row('flood', flooded));
  const ratio =
    pct(
      flooded.probes.map((p) => p.readyMs),
      99,
    ) /
    pct(
      quiet.probes.map((p) => p.readyMs),
      99,
    );
  console.log(
    `\nstart → ready p99 under the flood: ${ratio.toFixed(2)}× quiet; the flooder wrote ` +
      `${flood.written} messages; the server's close: ${flood.close ?? 'none'} ${flood.reason ?? ''}`,
  );
  for (const f of new Set(flooded.failures)) console.log(`failed under the flood: ${f}`);
} finally {
  await cleanup();
}
process.exit(0);
