export { startAgentsService, agentsHandlers } from './service.js';
export { AgentStore } from './store.js';
export { loadConfig } from './config.js';
