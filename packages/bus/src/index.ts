export * from './connect.js';
export * from './codec.js';
export * from './server.js';
export * from './client.js';
export * from './lazy-child.js';
export type { Logger } from 'pino';
export * from './kv.js';
export * from './observe.js';
export * from './streams.js';
