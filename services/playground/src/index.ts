export { startPlaygroundService, playgroundHandlers, type PlaygroundServiceConfig } from './service.js';
export { loadConfig, PROVIDER_KEY_VARS } from './config.js';
export { keyStatus, currentKeyEnv } from './env-keys.js';
