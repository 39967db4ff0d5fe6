export * from './config.js';
export * from './logger.js';
export * from './lifecycle.js';
export * from './idempotency.js';
export * from './bus-service.js';
export {
  runProcess,
  type ProcessDeps,
  type ProcessHost,
  type ProcessOptions,
  type Running,
} from './run-process.js';
export * from './tracing.js';
export * from './metrics.js';
export * from './ops-server.js';
export * from './fast-histogram.js';
export * from './sealing.js';
export * from './signed-tokens.js';
export * from './socket-close.js';
export * from './address-key.js';
export * from './connection-cap.js';
