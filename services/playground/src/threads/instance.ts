import { dispose as disposeLiveKit } from '@livekit/rtc-node';
import { idempotency, RedisIdempotencyStore, runProcess, type ProcessHost } from '@vab/service-kit';
import { redisTargetOf } from '@vab/storage';
import type { DestinationStream } from 'pino';
import type { PlaygroundConfig } from '../config.js';
import { surviveLiveKitRejections } from '../models/stray-rejections.js';
import { logLiveKitAs } from '../observability/telemetry.js';
import { startPlaygroundService } from '../service.js';

export interface InstanceOptions {
  /** Every line of the instance, LiveKit's and ours, goes here (through the credentials filter). */
  logDestination: DestinationStream;
  /** A thread of a process (threads/thread-main.ts); none: the instance is the whole process. */
  host?: ProcessHost | undefined;
  /** On every line of the instance's own logger (the thread it runs on). */
  logFields?: Record<string, string> | undefined;
  /** Whether it takes LiveKit room sessions (service.ts says why only one thread of a process does). */
  rooms?: boolean | undefined;
  /** LiveKit's native side ended after the connections closed (default: at once). */
  dispose?: (() => Promise<void>) | undefined;
}

/**
 * One playground instance: what the process ran before threads, and what each of its threads runs now. Its
 * own NATS connection (named by INSTANCE_ID), Redis for Idempotency-Keys when configured, the service, and
 * the lifecycle (runProcess): the signals' when it is the process, its host's when it is a thread.
 */
export function runPlaygroundInstance(config: Readonly<PlaygroundConfig>, opts: InstanceOptions): void {
  // LiveKit Agents logs in the stack's format, with the session's ids (before any of its loggers exists)
  logLiveKitAs(config.LOG_LEVEL, opts.logDestination);
  runProcess({
    service: 'playground',
    config,
    connectionName: `playground-${config.INSTANCE_ID}`,
    // Redis only when configured (it holds Idempotency-Keys); checked on /readyz then
    redis:
      config.REDIS_URL || config.REDIS_CLUSTER_NODES
        ? redisTargetOf({ ...config, REDIS_URL: config.REDIS_URL ?? '' })
        : undefined,
    start: async ({ nc, log, redis, tracing }) => {
      surviveLiveKitRejections(log);
      const service = startPlaygroundService({
        nc,
        log,
        config,
        tracing,
        rooms: opts.rooms,
        ...(redis ? { idempotency: idempotency(new RedisIdempotencyStore(redis, 'pg:')) } : {}),
      });
      await service.ready;
      log.info(
        { instanceId: config.INSTANCE_ID, maxSessions: config.MAX_SESSIONS },
        'playground instance up',
      );
      // stop: every session stops (agent, room, test session) before the connection that reaches them goes
      return service;
    },
    dispose: opts.dispose ?? disposeLiveKit,
    logDestination: opts.logDestination,
    logFields: opts.logFields,
    host: opts.host,
  });
}
