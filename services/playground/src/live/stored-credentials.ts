import type { BusClient } from '@vab/bus';
import {
  CREDENTIAL_PROVIDERS,
  OpenedCredentials,
  Subjects,
  type ApiKeys,
  type CredentialStatus,
  type PutCredentialsBody,
} from '@vab/contracts';
import type { Sealer } from './sealing.js';

/**
 * The agent's stored provider keys (issue 45): merged, sealed and stored here by `PUT …/credentials` (the
 * sessions service keeps the sealed blob only), opened here at a call's start and for a deploy's readiness
 * check. The values never leave this process except towards the providers a flow points at (the key rule).
 */
export class StoredCredentials {
  constructor(private readonly deps: { bus: BusClient; sealer: Sealer; timeoutMs: number }) {}

  /** The agent's keys, opened; empty when none are stored. */
  async open(agentId: string, requestId: string): Promise<OpenedCredentials> {
    const { sealed } = await this.deps.bus.request(
      Subjects.credentialsSealed,
      { agentId },
      { timeoutMs: this.deps.timeoutMs, requestId },
    );
    if (!sealed) return {};
    return OpenedCredentials.parse(this.deps.sealer.open(agentId, sealed));
  }

  /** As a start's `apiKeys`: the key rule treats them like keys a request brought. */
  async apiKeys(agentId: string, requestId: string): Promise<ApiKeys> {
    return { ...(await this.open(agentId, requestId)) };
  }

  async put(agentId: string, body: PutCredentialsBody, requestId: string): Promise<CredentialStatus> {
    // refused before anything is read when no key can seal them
    this.deps.sealer.seal(agentId, {});
    const merged: OpenedCredentials = { ...(await this.open(agentId, requestId)) };
    for (const p of CREDENTIAL_PROVIDERS) {
      const v = body.apiKeys[p];
      if (v === null) delete merged[p];
      else if (v !== undefined) merged[p] = v;
    }
    const status: CredentialStatus['apiKeys'] = {};
    for (const p of CREDENTIAL_PROVIDERS) {
      const v = merged[p];
      // a short value would show too much of itself
      if (v) status[p] = { set: true, last4: v.length >= 12 ? v.slice(-4) : '' };
    }
    const empty = Object.keys(status).length === 0;
    return this.deps.bus.request(
      Subjects.credentialsStore,
      { agentId, sealed: empty ? null : this.deps.sealer.seal(agentId, merged), status },
      { timeoutMs: this.deps.timeoutMs, requestId },
    );
  }
}
