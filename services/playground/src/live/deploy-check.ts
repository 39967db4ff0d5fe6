import type { BusClient } from '@vab/bus';
import { AppError, type DeployIssue, type FlowIssue } from '@vab/contracts';
import { flowToRun } from '../conversation/flow-to-run.js';
import type { KeyEnv } from '../models/provider-keys.js';
import type { ReadinessCheck } from '../models/readiness.js';
import type { StoredCredentials } from './stored-credentials.js';

/**
 * The deploy pipeline's readiness check (`playground.deploys.check`): the pinned version, checked as a public
 * caller's start will run it — a voice session, the agent's stored credentials as its keys, the server's keys
 * under the key rule, never a request's. Ready, or the issues a builder must fix.
 */
export class DeployCheck {
  constructor(
    private readonly deps: {
      bus: BusClient;
      readiness: ReadinessCheck;
      credentials: StoredCredentials;
      env: () => Promise<KeyEnv>;
      timeoutMs: number;
    },
  ) {}

  async check(
    agentId: string,
    version: number,
    requestId: string,
  ): Promise<{ ready: boolean; issues: DeployIssue[] }> {
    const fail = (issues: DeployIssue[]) => ({ ready: false, issues });
    let flow;
    try {
      ({ flow } = await flowToRun(
        this.deps.bus,
        agentId,
        { version },
        { timeoutMs: this.deps.timeoutMs, requestId },
      ));
    } catch (err) {
      if (err instanceof AppError && err.code === 'NOT_FOUND')
        return fail([{ code: 'NOT_FOUND', message: err.message }]);
      throw err;
    }
    let apiKeys;
    try {
      apiKeys = await this.deps.credentials.apiKeys(agentId, requestId);
    } catch (err) {
      const message = err instanceof AppError ? err.message : 'the stored credentials could not be read';
      return fail([{ code: 'CREDENTIALS_UNAVAILABLE', message }]);
    }
    try {
      this.deps.readiness.check(flow, 'voice', await this.deps.env(), apiKeys);
      return { ready: true, issues: [] };
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      const found = Array.isArray(err.details) ? (err.details as FlowIssue[]) : [];
      return fail(
        found.length > 0
          ? found.map((i) => ({
              code: i.code,
              message: i.message,
              ...(i.nodeId ? { nodeId: i.nodeId } : {}),
            }))
          : [{ code: err.code, message: err.message }],
      );
    }
  }
}
