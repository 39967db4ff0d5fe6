export * from './ports.js';
export * from './servers.js';
export * from './containers.js';
