export { startPlaygroundService, type PlaygroundService, type PlaygroundServiceConfig } from './service.js';
export type { AgentRunner, RunningAgent, RunnerStartOptions } from './transports/livekit/runner.js';
export { LiveKitAgentRunner } from './transports/livekit/runner.js';
export { ROOM_PREFIX, type RoomMetadata } from './transports/livekit/media-server.js';
export { loadConfig } from './config.js';
export { KEY_ENV_VARS, keyStatus, currentKeyEnv } from './env-keys.js';
export type { Resolver } from './egress/client.js';
export { ensureEventsStream, SessionEvents, type EventsConfig } from './host/events.js';
export { CallerSlots, CALLER_SLOTS_BUCKET } from './host/caller-slots.js';
