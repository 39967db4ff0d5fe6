#!/usr/bin/env node
// An OTLP/HTTP trace sink for measuring what tracing costs: accepts http/protobuf and http/json exports at
// /v1/traces, answers at once, decodes nothing, and prints what it took in every 10 s and on exit.
// Usage: npm run build && node bench/otlp-sink.mjs [--port 4318]
import { startOtlpReceiver } from '@vab/testkit';
import { setInterval } from 'node:timers';
import { option } from './processes.mjs';

const sink = await startOtlpReceiver({ keep: false, port: option('port', 4318) });
console.log(`otlp sink at ${sink.url}`);
const report = () => {
  const t = sink.totals();
  console.log(`exports ${t.exports}, ${(t.bytes / 1e6).toFixed(1)} MB`);
};
setInterval(report, 10_000).unref();
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, async () => {
    report();
    await sink.close();
    process.exit(0);
  });
}
