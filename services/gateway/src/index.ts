export { apiDocument, buildGateway } from './app.js';
export { loadConfig } from './config.js';
export { routes } from './route-table.js';
export { registerSecurity, tokenMatcher, type SecurityConfig } from './security.js';
export { createEdge } from './edge.js';
export { securityOf } from './config.js';
export { DEFAULT_EVENT_STREAMS, type EventStreamSettings } from './events.js';
