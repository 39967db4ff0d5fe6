import type { BusClient } from '@vab/bus';
import type { ConversationKit } from '../conversation/conversation-kit.js';
import type { ModelFactory } from '../models/model-factory.js';
import type { KeyEnv } from '../models/provider-keys.js';
import type { HostedSessions } from '../sessions/hosted-sessions.js';

/**
 * What every transport (text, voice socket, room) starts a session with: the hosted sessions it registers in,
 * the bus, the models and conversation it builds the flow's agent from, and the server's provider keys. Each
 * transport adds its own.
 */
export interface TransportDeps {
  sessions: HostedSessions;
  bus: BusClient;
  models: ModelFactory;
  kit: ConversationKit;
  env(): Promise<KeyEnv>;
}
