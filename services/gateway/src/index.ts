export { buildGateway } from './app.js';
export { loadConfig } from './config.js';
export { routes } from './route-table.js';
export { buildOpenApi } from './openapi.js';
export { registerSecurity, tokenMatcher, type SecurityConfig } from './security.js';
export { createEdge } from './edge.js';
export { securityOf } from './config.js';
