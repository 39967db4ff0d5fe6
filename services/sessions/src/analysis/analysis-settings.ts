import { AnalysisSettings, DEFAULT_ANALYSIS_SETTINGS } from '@vab/contracts';
import type { RedisClient } from '@vab/storage';

const key = (agentId: string) => `ss:{${agentId}}:analysis-settings`;

/** Per agent, beside its flow: what every ended call's analysis asks (docs/decisions/0034-post-call-analysis.md). */
export class AnalysisSettingsStore {
  constructor(private readonly redis: RedisClient) {}

  async get(agentId: string): Promise<AnalysisSettings> {
    const raw = await this.redis.get(key(agentId));
    return raw ? AnalysisSettings.parse(JSON.parse(raw)) : DEFAULT_ANALYSIS_SETTINGS;
  }

  async set(agentId: string, settings: AnalysisSettings): Promise<AnalysisSettings> {
    await this.redis.set(key(agentId), JSON.stringify(settings));
    return settings;
  }
}
