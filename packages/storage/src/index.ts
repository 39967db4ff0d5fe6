// @vab/storage: the Redis connection each service opens, and what every store shares on top of it.
export { Cluster, Redis } from 'ioredis';
export {
  createRedis,
  describeTarget,
  redisTargetOf,
  type RedisClient,
  type RedisTarget,
} from './connection.js';
export { scriptError, storage } from './errors.js';
export { observeRedisCommands, type RedisCommandObserver } from './observe.js';
export { masters, scanKeys } from './scan.js';
export { WriteConcern } from './wait.js';
