export { startSessionsService, sessionsHandlers } from './service.js';
export { SessionsStore } from './store.js';
export { loadConfig, limitsFrom, DEFAULT_LIMITS, type SessionsLimits } from './config.js';
export { subdomainBase } from './subdomain.js';
export type { SessionsService } from './service.js';
