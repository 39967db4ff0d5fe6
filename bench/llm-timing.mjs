// Benchmark-only preload (`node --import ./bench/llm-timing.mjs …`): appends every OpenAI-compatible model
// call's own duration, as LiveKit Agents measures it (its `metrics_collected` event: from the request to the
// last streamed chunk, on the client side), to $LLM_TIMING_FILE as `<epoch ms> <duration ms>` lines. What a
// turn costs beyond its model calls is then the turn's time minus these.
import * as openai from '@livekit/agents-plugin-openai';
import { appendFileSync } from 'node:fs';

const file = process.env.LLM_TIMING_FILE;
const chat = openai.LLM.prototype.chat;
const watched = new WeakSet();
openai.LLM.prototype.chat = function (...args) {
  if (file && !watched.has(this)) {
    watched.add(this);
    this.on('metrics_collected', (m) => appendFileSync(file, `${Date.now()} ${m.durationMs}\n`));
  }
  return chat.apply(this, args);
};
