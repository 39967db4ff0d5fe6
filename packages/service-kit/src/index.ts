export * from './config.js';
export * from './logger.js';
export * from './lifecycle.js';
export * from './idempotency.js';
export * from './bus-service.js';
export * from './metrics.js';
export * from './ops-server.js';
export * from './fast-histogram.js';
