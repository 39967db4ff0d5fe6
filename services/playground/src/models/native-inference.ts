/**
 * The native models' inference (`@livekit/local-inference`: the VAD's and the end-of-turn model's `predict`)
 * runs on libuv's thread pool and answers on the thread that asked. A worker thread that exits while an
 * answer is on its way aborts the whole process: the addon throws into a thread being torn down (`napi_throw`
 * fails: "FATAL ERROR", SIGABRT), and every other thread's sessions go with it, undrained. So a thread about to
 * exit halts native inference first and waits for what is in flight (`haltNativeInference`).
 */
let inFlight = 0;
let halted = false;
const drained: (() => void)[] = [];

/** Runs one native inference, counted; once halted, none runs and the caller's promise never settles. */
export async function nativeInference<T>(run: () => Promise<T>): Promise<T> {
  if (halted) return new Promise<T>(() => undefined);
  inFlight++;
  try {
    return await run();
  } finally {
    inFlight--;
    if (inFlight === 0) for (const resolve of drained.splice(0)) resolve();
  }
}

/** No native inference starts from now on; resolves once none is in flight, or after `boundMs`. */
export function haltNativeInference(boundMs: number): Promise<void> {
  halted = true;
  if (inFlight === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const bound = setTimeout(resolve, boundMs);
    drained.push(() => {
      clearTimeout(bound);
      resolve();
    });
  });
}
