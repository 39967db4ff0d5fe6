// Preloaded into a service process (NODE_OPTIONS=--import …) by tests about load: each SIGUSR2 turns it on or
// off; on, it keeps the process's own event loop busy HOG_BLOCK_MS out of every HOG_EVERY_MS, as more sessions'
// per-frame work than the instance can run would. A load, not a fake: the process measures itself as always.
// HOG_EVERY_MS=0: busy HOG_BLOCK_MS on every turn of the loop instead, so each turn does what one turn can (what
// its I/O brought in, once) and then waits behind the block: work that takes many turns, as a VAD does (each
// 32 ms window of audio is one inference on the thread pool, one turn to come back), falls behind real time.
import { clearInterval, clearImmediate, setImmediate, setInterval } from 'node:timers';

const block = Number(process.env.HOG_BLOCK_MS ?? 150);
const every = Number(process.env.HOG_EVERY_MS ?? 200);
let stop;
const busy = () => {
  const until = Date.now() + block;
  while (Date.now() < until);
};
process.on('SIGUSR2', () => {
  if (stop) {
    stop();
    stop = undefined;
    return;
  }
  if (every > 0) {
    const timer = setInterval(busy, every);
    timer.unref();
    stop = () => clearInterval(timer);
    return;
  }
  let turn;
  const next = () => {
    busy();
    turn = setImmediate(next);
    turn.unref();
  };
  turn = setImmediate(next);
  turn.unref();
  stop = () => clearImmediate(turn);
});
