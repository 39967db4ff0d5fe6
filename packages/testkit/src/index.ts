export * from './ports.js';
export * from './servers.js';
export * from './containers.js';
export * from './flows.js';
export * from './livekit-fake.js';
export * from './logs.js';
export * from './clusters.js';
export * from './browser.js';
