export * from './logger.js';
export * from './env.js';
export * from './connect.js';
export * from './codec.js';
export * from './server.js';
export * from './client.js';
export * from './lifecycle.js';
export * from './idempotency.js';
