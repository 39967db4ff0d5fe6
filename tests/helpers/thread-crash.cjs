// Preloaded into a playground process (NODE_OPTIONS=--require …) by the test of a thread's death: in the
// worker thread whose index is CRASH_THREAD, an uncaught error is thrown once the file CRASH_THREAD_FILE exists
// (the test writes it), as a bug in a session's code would throw one. Elsewhere (the main thread, the other
// threads, the recorder's timeline thread, the encoder host) it does nothing. CommonJS: Node 20 runs a
// `--require` preload in every worker thread, an `--import` one only on the main thread.
/* global require, process, setInterval, clearInterval */
/* eslint-disable @typescript-eslint/no-require-imports -- a --require preload */
const { isMainThread, workerData } = require('node:worker_threads');
const { existsSync } = require('node:fs');

const file = process.env.CRASH_THREAD_FILE;
const index = workerData && typeof workerData === 'object' ? workerData.index : undefined;
if (!isMainThread && file && index === Number(process.env.CRASH_THREAD)) {
  const timer = setInterval(() => {
    if (!existsSync(file)) return;
    clearInterval(timer);
    throw new Error('a bug in a playground thread (injected by the test)');
  }, 100);
  timer.unref();
}
