export { startAgentsService, agentsHandlers } from './service.js';
export { AgentStore } from './store.js';
export { loadConfig } from './config.js';
export type { AgentsService } from './service.js';
