import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from 'pino';

export interface NatsOptions {
  url: string;
  name: string;
  /** The service this process is: its replies come to `_INBOX_<service>.>`, which only it may read. */
  service: string;
  user?: string | undefined;
  pass?: string | undefined;
}

/**
 * Per-service reply inboxes: with NATS permissions (deploy/nats.conf), a service may subscribe only to its
 * own inbox, so a compromised service cannot read the replies meant for another.
 */
export const inboxPrefixOf = (service: string) => `_INBOX_${service}`;

/**
 * Connects with unlimited reconnects: a restarted nats-server must never need a restart of ours.
 * Status changes are logged so an operator sees the outage and the recovery.
 */
export async function connectNats(opts: NatsOptions, log: Logger): Promise<NatsConnection> {
  const nc = await connect({
    servers: opts.url.split(','),
    name: opts.name,
    user: opts.user,
    pass: opts.pass,
    inboxPrefix: inboxPrefixOf(opts.service),
    // nats.js otherwise builds a RequestError and a TimeoutError (stack traces included) for every request,
    // just in case: ~10 % of the gateway's CPU under load (measured, docs/performance.md)
    noAsyncTraces: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    timeout: 5000,
  });
  log.info({ server: nc.getServer(), maxPayload: nc.info?.max_payload }, 'nats connected');
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') {
        log.warn({ status: s.type, server: 'server' in s ? s.server : undefined }, 'nats status');
      }
    }
  })();
  return nc;
}
