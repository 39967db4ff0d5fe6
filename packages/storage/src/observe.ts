import type { RedisClient } from './connection.js';
// the module's own: the global `performance` is a getter on globalThis, run on every read (Node 20)
import { performance } from 'node:perf_hooks';

/** Hears each Redis command's name, whether it succeeded, and how long it took (seconds). */
export type RedisCommandObserver = (command: string, ok: boolean, seconds: number) => void;

let current: RedisCommandObserver | undefined;

/**
 * The process's Redis command observer (its metrics; the service kit sets it once at start). Clients made by
 * `createRedis` after this call are timed; one made before, or with none set, costs nothing extra.
 */
export function observeRedisCommands(observer: RedisCommandObserver | undefined): void {
  current = observer;
}

const TIMED = Symbol.for('vab.redis.timed');

interface Command {
  name: string;
  resolve: (result: unknown) => void;
  reject: (err: Error) => void;
  [TIMED]?: true;
}

/**
 * Times every command a client sends by wrapping its `sendCommand` (its one entry for commands, pipelines and
 * MULTI; on a cluster, the cluster's own). ioredis 5.11 also publishes commands on its `ioredis:command`
 * tracing channel, but subscribing there cost ~4 µs of CPU per command (it builds a context with every
 * argument as a string and wraps the promise) against ~0.6 µs for this (bench/redis-timing.mjs). A command sent
 * again (a reconnect's resend, a cluster redirect) is timed once, from its first send.
 *
 * The command's own `resolve` and `reject` (public fields of ioredis's Command) are wrapped, not its promise
 * followed: a `then` on it was one more promise and microtask per command. Whatever ioredis wraps them in
 * later (a cluster's redirect handling, a script's NOSCRIPT check) calls these in the end.
 */
export function timeCommands(client: RedisClient): void {
  const observe = current;
  if (!observe) return;
  const target = client as unknown as { sendCommand(command: Command, ...rest: unknown[]): unknown };
  const send = target.sendCommand;
  target.sendCommand = function (this: unknown, command: Command) {
    if (!command[TIMED]) {
      command[TIMED] = true;
      const startedAt = performance.now();
      const { resolve, reject } = command;
      command.resolve = (result) => {
        settled(observe, command.name, true, startedAt);
        resolve(result);
      };
      command.reject = (err) => {
        settled(observe, command.name, false, startedAt);
        reject(err);
      };
    }
    // `arguments` as they came (a stream, a cluster node): no rest array per command
    // eslint-disable-next-line prefer-rest-params
    return send.apply(this, arguments as unknown as [Command, ...unknown[]]);
  };
}

/** Runs inside ioredis's reply parsing: an observer that throws must not break the connection. */
function settled(observe: RedisCommandObserver, name: string, ok: boolean, startedAt: number): void {
  try {
    observe(name, ok, (performance.now() - startedAt) / 1000);
  } catch {
    // a metric lost, nothing else
  }
}
