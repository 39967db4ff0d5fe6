import { configOrExit, runBusService } from '@vab/service-kit';
import { loadConfig } from './config.js';
import { startWebhooksService } from './service.js';

const config = configOrExit('webhooks', () => loadConfig(process.env));
runBusService('webhooks', config, (deps) =>
  startWebhooksService({
    ...deps,
    settings: {
      secretsKey: config.secretsKey,
      oldSecretsKeys: config.WEBHOOK_SECRETS_OLD_KEYS,
      egressAllow: config.WEBHOOK_EGRESS_ALLOW,
      timeoutMs: config.WEBHOOK_TIMEOUT_MS,
      concurrency: config.WEBHOOK_CONCURRENCY,
      retry: {
        firstMs: config.WEBHOOK_RETRY_FIRST_MS,
        maxDelayMs: config.WEBHOOK_RETRY_MAX_DELAY_MS,
        forMs: config.WEBHOOK_RETRY_FOR_MS,
      },
      failingAfter: config.WEBHOOK_FAILING_AFTER,
      retentionDays: config.WEBHOOK_DELIVERY_RETENTION_DAYS,
      pollMs: config.WEBHOOK_POLL_MS,
      stream: { maxAgeMs: config.DOMAIN_EVENTS_MAX_AGE_MS, replicas: config.DOMAIN_EVENTS_REPLICAS },
    },
  }),
);
