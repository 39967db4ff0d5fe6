export * from './policy.js';
export * from './client.js';
