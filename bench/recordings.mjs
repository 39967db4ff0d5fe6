#!/usr/bin/env node
// Recordings of voice sessions, on this machine (docs/performance.md › Recordings):
// 1. CPU: the same --sessions voice sessions (espeak-ng speech in real time, --turns turns each, against instant
//    chat/speech stubs) on one playground instance in this process, once with RECORDINGS=off and once on, in
//    the same run: the playground's CPU (this process, and its encoder host with the FFmpeg encoders it
//    starts; the callers, a process of their own, are taken out) per second of call, and the difference.
// 2. Size: bytes kept per second of call (each recording's `bytes / durationMs`).
// 3. Serving: time to the first byte of `GET …/recording` through the gateway, --fetches times over the
//    recordings made (p50/p99).
// Usage: npm run build && node bench/recordings.mjs [--sessions 5] [--turns 3] [--fetches 200]
import { connectNats } from '@vab/bus';
import { loadConfig, startPlaygroundService } from '@vab/playground';
import { startLocalNats, startLocalRedis, voiceFlow } from '@vab/testkit';
import { readdirSync, readFileSync } from 'node:fs';
import { pino } from 'pino';
import { option, runVoiceCallers, sendJson, startCore, startVoiceStubs, voiceConfig } from './processes.mjs';
import { pct, root as here } from './lib/figures.mjs';

const SESSIONS = option('sessions', 5);
const TURNS = option('turns', 3);
const FETCHES = option('fetches', 200);
const log = pino({ level: 'silent' });

const fmt = (x, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : '—');

/** A process's fields from /proc (after its name): utime is [11], stime [12], cutime [13], cstime [14]. */
const statOf = (pid) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');

/**
 * CPU seconds: this process's own, its reaped children's (the callers, once they exit), and the playground's
 * encoder host's (the FFmpeg encoders it starts, reaped by it as each recording ends, and itself).
 */
function cpu() {
  const ticks = (f, ...i) => i.reduce((n, k) => n + Number(f[k]) / 100, 0);
  const me = statOf('self');
  let encoders = 0;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const f = statOf(pid);
      if (Number(f[1]) !== process.pid) continue;
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('encoder-process')) continue;
      encoders += ticks(f, 11, 12, 13, 14);
    } catch {
      // gone meanwhile
    }
  }
  return { self: ticks(me, 11, 12), children: ticks(me, 13, 14), encoders };
}

const nats = await startLocalNats();
const redis = await startLocalRedis();
const core = await startCore(
  here,
  { NATS_URL: nats.url, REDIS_URL: redis.url },
  { SESSION_RATE_LIMIT_MAX: '1000000000' },
);
const nc = await connectNats({ url: nats.url, name: 'bench', service: 'playground' }, log);
// in a process of their own: the TTS stub's espeak-ng forks are not the playground's
const stubs = await startVoiceStubs(here);

/** One phase: SESSIONS sessions talking TURNS turns, recordings on or off; what the playground's CPU was. */
async function phase(recordings) {
  const playground = startPlaygroundService({
    nc,
    log,
    config: voiceConfig(loadConfig, SESSIONS, recordings),
  });
  await playground.ready;
  const agent = await sendJson('POST', `${core.url}/api/agents`, {
    name: `bench recordings ${recordings}`,
    flow: voiceFlow({
      chatURL: stubs.chatURL,
      speechURL: stubs.speechURL,
      agent: { minEndpointingDelay: 500 },
    }),
  });
  const before = cpu();
  const result = await runVoiceCallers(here, {
    url: core.url,
    agentId: agent.id,
    sessions: SESSIONS,
    turns: TURNS,
  });
  // every session has stopped (and stored its recording) before the CPU is read again
  const records = [];
  for (const id of result.sessionIds) {
    for (let i = 0; ; i++) {
      const s = await sendJson('GET', `${core.url}/api/agents/${agent.id}/test-sessions/${id}`);
      if (s.status === 'closed' && (recordings === 'off' || s.recording)) {
        records.push(s);
        break;
      }
      if (i > 200) throw new Error(`session ${id} did not close`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const after = cpu();
  await playground.stop(5000);
  const seconds = records.reduce((n, s) => n + s.durationMs, 0) / 1000;
  const encoders = after.encoders - before.encoders;
  const cpuSeconds =
    after.self - before.self + (after.children - before.children - result.cpuMs / 1000) + encoders;
  return { agentId: agent.id, records, seconds, cpuSeconds, encoders };
}

try {
  const off = await phase('off');
  const on = await phase('on');
  const perSecond = (p) => (p.cpuSeconds / p.seconds) * 100;
  console.log(`\n### ${SESSIONS} voice sessions × ${TURNS} turns, recordings off then on (same run)\n`);
  console.log(
    '| recordings | call s | playground CPU s | of which FFmpeg | CPU per call second (% of a core) |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const [name, p] of [
    ['off', off],
    ['on', on],
  ]) {
    const ffmpeg = fmt(Math.max(0, p.encoders));
    console.log(
      `| ${name} | ${fmt(p.seconds, 1)} | ${fmt(p.cpuSeconds)} | ${ffmpeg} | ${fmt(perSecond(p))} |`,
    );
  }
  console.log(
    `\nrecording costs **${fmt(perSecond(on) - perSecond(off))} %** of a core per session (` +
      `${fmt(((perSecond(on) - perSecond(off)) / perSecond(off)) * 100, 1)} % more than without)`,
  );
  const rates = on.records.map((s) => s.recording.bytes / (s.recording.durationMs / 1000));
  console.log(
    `\nkept per second of call: p50 **${fmt(pct(rates, 50) / 1024)} KB/s**, max ${fmt(Math.max(...rates) / 1024)} KB/s ` +
      `(${on.records.length} recordings, ${fmt(on.records.reduce((n, s) => n + s.recording.bytes, 0) / 1024, 0)} KB)`,
  );
  const firstByte = [];
  for (let i = 0; i < FETCHES; i++) {
    const s = on.records[i % on.records.length];
    const t0 = performance.now();
    const res = await fetch(`${core.url}/api/agents/${on.agentId}/test-sessions/${s.id}/recording`);
    const reader = res.body.getReader();
    await reader.read();
    firstByte.push(performance.now() - t0);
    await reader.cancel();
  }
  console.log(
    `\nfirst byte of GET …/recording (${FETCHES} requests): p50 **${fmt(pct(firstByte, 50))} ms**, p99 ${fmt(pct(firstByte, 99))} ms`,
  );
} finally {
  stubs.close();
  for (const p of core.procs) p.kill();
  await nc.close().catch(() => undefined);
  await nats.stop();
  await redis.stop();
}
process.exit(0);
