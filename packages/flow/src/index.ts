export * from './types.js';
export { compile } from './compiler.js';
export * from './engine.js';
export { isBranch, isTerminal } from './node-types.js';
