export { startPlaygroundService, type PlaygroundService, type PlaygroundServiceConfig } from './service.js';
export type { RoomAgent, RoomAgentOptions, RoomAgents } from './transports/room/room-agents.js';
export { LiveKitRoomAgents } from './transports/room/room-agents.js';
export { ROOM_PREFIX, type RoomMetadata } from './transports/room/media-server.js';
export { loadConfig } from './config.js';
export { KEY_ENV_VARS, keyStatus, currentKeyEnv } from './models/env-keys.js';
export type { Resolver } from './egress/client.js';
export { ensureEventsStream, SessionEvents, type EventsConfig } from './sessions/events.js';
export { CallerSlots, CALLER_SLOTS_BUCKET } from './sessions/caller-slots.js';
/** The attempts' seeded generator (mulberry32): what a seed repeats, tests draw from too. */
export { seededRandom } from './testing/seeded-random.js';
/** A process's threads (PLAYGROUND_THREADS), as bench/voice.mjs hosts them. */
export { PlaygroundThreads, threadEnv, type ThreadsOptions } from './threads/supervisor.js';
