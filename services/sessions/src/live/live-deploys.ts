import type { NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError, Kvm, type KV } from '@vab/bus';
import { LIVE_DEPLOYS_BUCKET, type DeployRecord, type LiveDeploy } from '@vab/contracts';

/**
 * The KV bucket live-deploys (key: subdomain): what is live, for every gateway and playground instance at
 * once (they watch it). Written when a deploy goes live or its settings change, deleted when the agent has
 * none live. Redis stays the record; this is its broadcast.
 */
export class LiveDeploys {
  private bucket: Promise<KV> | undefined;

  constructor(private readonly nc: NatsConnection) {}

  private open(): Promise<KV> {
    return (this.bucket ??= (async () => {
      const kvm = new Kvm(this.nc);
      try {
        return await kvm.create(LIVE_DEPLOYS_BUCKET, { history: 1 });
      } catch (err) {
        if (err instanceof JetStreamApiError) return kvm.open(LIVE_DEPLOYS_BUCKET);
        throw err;
      }
    })().catch((err: unknown) => {
      this.bucket = undefined;
      throw err;
    }));
  }

  async put(deploy: DeployRecord): Promise<void> {
    const entry: LiveDeploy = {
      agentId: deploy.agentId,
      deployId: deploy.id,
      deployNumber: deploy.deployNumber,
      version: deploy.version,
      subdomain: deploy.subdomain,
      settings: {
        maxConcurrentCalls: deploy.maxConcurrentCalls,
        dailyCallCap: deploy.dailyCallCap,
        maxCallDurationMs: deploy.maxCallDurationMs,
        silenceTimeoutMs: deploy.silenceTimeoutMs,
        endCallMessage: deploy.endCallMessage,
      },
      liveAt: deploy.liveAt ?? deploy.updatedAt,
    };
    await (await this.open()).put(deploy.subdomain, JSON.stringify(entry));
  }

  async remove(subdomain: string): Promise<void> {
    await (await this.open()).delete(subdomain);
  }
}
