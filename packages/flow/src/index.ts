export * from './types.js';
export { compile } from './compiler.js';
export * from './engine.js';
export { isBranch, isTerminal, modelKindOf, type ModelKind } from './node-types.js';
export { mockTargets, modelOf, URL_PARAMS, urlsOf } from './params.js';
export { EXAMPLE_FLOW } from './example-flow.js';
export { flowReferenceMarkdown, nodeJsonSchemas } from './reference.js';
export { HANDLES, nodeTypes } from './node-types.js';
export { paramDocs, PARAMS, type ParamDoc } from './params.js';
