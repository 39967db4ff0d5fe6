// Preloaded into a service process (NODE_OPTIONS=--import …) by tests about load: each SIGUSR2 turns it on or
// off; on, it keeps the process's own event loop busy HOG_BLOCK_MS out of every HOG_EVERY_MS, as more sessions'
// per-frame work than the instance can run would. A load, not a fake: the process measures itself as always.
import { clearInterval, setInterval } from 'node:timers';

const block = Number(process.env.HOG_BLOCK_MS ?? 150);
const every = Number(process.env.HOG_EVERY_MS ?? 200);
let timer;
process.on('SIGUSR2', () => {
  if (timer) {
    clearInterval(timer);
    timer = undefined;
    return;
  }
  timer = setInterval(() => {
    const until = Date.now() + block;
    while (Date.now() < until);
  }, every);
  timer.unref();
});
