export { settingsOf as webhooksSettingsFrom, startWebhooksService, webhooksHandlers } from './service.js';
export type { WebhooksService, WebhooksSettings } from './service.js';
export { loadConfig } from './config.js';
export { verifySignature, signatureHeader } from './signing.js';
export { deliveryIdOf } from './delivery/fanout.js';
