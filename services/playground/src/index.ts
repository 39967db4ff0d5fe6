export { startPlaygroundService, type PlaygroundService, type PlaygroundServiceConfig } from './service.js';
export type { AgentRunner, RunningAgent, RunnerStartOptions } from './voice/runner.js';
export { LiveKitAgentRunner } from './voice/runner.js';
export { ROOM_PREFIX, type RoomMetadata } from './voice/media-server.js';
export { loadConfig, PROVIDER_KEY_VARS } from './config.js';
export { keyStatus, currentKeyEnv } from './env-keys.js';
