// Benchmark-only preload (`node --import ./bench/llm-timing.mjs …`): appends every OpenAI-compatible model
// call to $LLM_TIMING_FILE as `<epoch ms at its end> <duration ms>` lines: from the `chat()` call to LiveKit
// Agents' `metrics_collected` event for it (the last streamed chunk), on the client side. What a turn costs
// beyond its model calls is then the turn's time minus the calls that ended within it.
import * as openai from '@livekit/agents-plugin-openai';
import { appendFileSync } from 'node:fs';

const file = process.env.LLM_TIMING_FILE;
const chat = openai.LLM.prototype.chat;
/** Start times of each instance's calls under way, oldest first (a session's calls are sequential). */
const started = new WeakMap();
openai.LLM.prototype.chat = function (...args) {
  if (file && !started.has(this)) {
    started.set(this, []);
    this.on('metrics_collected', () => {
      const t0 = started.get(this).shift();
      if (t0 !== undefined) appendFileSync(file, `${Date.now()} ${(performance.now() - t0).toFixed(3)}\n`);
    });
  }
  started.get(this)?.push(performance.now());
  return chat.apply(this, args);
};
