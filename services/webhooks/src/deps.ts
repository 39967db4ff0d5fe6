import type { BusClient } from '@vab/bus';
import { AppError, Subjects } from '@vab/contracts';
import type { EgressPolicy } from '@vab/egress';
import type { SecretBox } from '@vab/service-kit';
import type { EndpointRecord, WebhookStore } from './store.js';

/** Endpoints one agent may have. */
export const MAX_ENDPOINTS_PER_AGENT = 20;

/** What the handlers share. */
export interface HandlerDeps {
  store: WebhookStore;
  box: SecretBox;
  bus: BusClient;
  policy: EgressPolicy;
  /** A redelivery by hand is due now: look at once. */
  kick(): void;
  now(): number;
}

/** The agent, which must exist and (for a write) not be archived: asked of the agents service. */
export async function requireAgent(deps: HandlerDeps, agentId: string, requestId: string, write: boolean) {
  const found = await deps.bus.request(
    Subjects.agentsLookup,
    { id: agentId },
    { timeoutMs: 2000, requestId },
  );
  if (!found.exists) throw new AppError('NOT_FOUND', `agent ${agentId} not found`);
  if (write && found.archived) throw new AppError('AGENT_ARCHIVED', `agent ${agentId} is archived`);
}

export async function requireEndpoint(
  deps: HandlerDeps,
  agentId: string,
  webhookId: string,
): Promise<EndpointRecord> {
  const found = await deps.store.getEndpoint(agentId, webhookId);
  if (!found) throw new AppError('NOT_FOUND', `webhook ${webhookId} not found`);
  return found;
}

/** A URL's text as the egress policy judges it before anything is sent (its name is checked again at connect). */
export function checkUrl(deps: HandlerDeps, url: string): void {
  const verdict = deps.policy.checkUrl(url);
  if (!verdict.ok) {
    throw new AppError('VALIDATION_FAILED', `the URL ${verdict.reason}`, {
      issues: [{ path: 'body.url', message: verdict.reason }],
    });
  }
}

/** The last 4 characters of a secret: enough to tell two apart, nothing to guess with. */
export const hintOf = (secret: string) => `…${secret.slice(-4)}`;
