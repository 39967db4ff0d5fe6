export { startSessionsService, sessionsHandlers } from './service.js';
export { SessionsStore } from './store.js';
/** The calls' store: tests write calls under the API with it, as a sessions instance does. */
export { CallsStore } from './live/calls-store.js';
/** The canary judge's listing of one side (what a check cost before its figures were counted): benchmarks. */
export { listedSide } from './live/canary.js';
export { loadConfig, limitsFrom, DEFAULT_LIMITS, type SessionsLimits } from './config.js';
export { subdomainBase } from './subdomain.js';
export type { SessionsService } from './service.js';
