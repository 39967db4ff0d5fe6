export * from './errors.js';
export * from './common.js';
export * from './flow.js';
export * from './agents.js';
export * from './sessions.js';
export * from './playground.js';
export * from './subjects.js';
export * from './warnings.js';
