import type { NatsConnection } from '@nats-io/transport-node';
import { lazyKvBucket, type KV } from '@vab/bus';
import { deployedVersionOf, LIVE_DEPLOYS_BUCKET, type DeployRecord, type LiveDeploy } from '@vab/contracts';

/**
 * The KV bucket live-deploys (key: subdomain): what is live, for every gateway and playground instance at
 * once (they watch it). Written when a deploy goes live or its settings change, deleted when the agent has
 * none live. Redis stays the record; this is its broadcast.
 */
export class LiveDeploys {
  private readonly open: () => Promise<KV>;

  constructor(nc: NatsConnection) {
    this.open = lazyKvBucket(nc, LIVE_DEPLOYS_BUCKET, { history: 1 });
  }

  async put(deploy: DeployRecord): Promise<void> {
    const entry: LiveDeploy = { ...deployedVersionOf(deploy), liveAt: deploy.liveAt ?? deploy.updatedAt };
    await (await this.open()).put(deploy.subdomain, JSON.stringify(entry));
  }

  async remove(subdomain: string): Promise<void> {
    await (await this.open()).delete(subdomain);
  }
}
