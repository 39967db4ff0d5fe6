import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Socket } from 'node:net';
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
const inboxPrefixOf = (service: string) => `_INBOX_${service}`;

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
    // just in case; what that costs is measured in docs/performance.md
    noAsyncTraces: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    waitOnFirstConnect: true,
    timeout: 5000,
  });
  coalesceWrites(nc, log);
  log.info({ server: nc.getServer(), maxPayload: nc.info?.max_payload }, 'nats connected');
  void (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect' || s.type === 'error') {
        log.warn(
          { code: 'NATS_STATUS', status: s.type, server: 'server' in s ? s.server : undefined },
          'nats status',
        );
      }
    }
  })();
  return nc;
}

interface TransportInternals {
  socket?: Socket;
  _send(frame: Uint8Array): Promise<void>;
  [COALESCED]?: true;
}

const COALESCED = Symbol.for('vab.nats.coalesced-writes');

/**
 * nats.js flushes its outbound buffer in a microtask, so every request the gateway forwards (each HTTP
 * request arrives in its own I/O callback) and every reply a service sends costs one socket write: one
 * syscall, and one read by nats-server, per message. Corking the socket until the end of this turn of the
 * event loop (setImmediate runs right after the I/O phase) sends everything written in one turn as one
 * write; under load that is tens of messages per syscall, at idle it adds no measurable delay. nats.js has
 * no option for this; measured against no patch in docs/performance.md › Libraries before patches. The
 * transport class is patched once (reconnects make new instances of it); nats.js is pinned, and if its
 * internals ever change shape, production skips this with a warning while bus.test.ts fails, naming it.
 */
export function coalesceWrites(nc: NatsConnection, log: Logger): void {
  const transport = (nc as unknown as { protocol?: { transport?: TransportInternals } }).protocol?.transport;
  const proto = transport ? (Object.getPrototypeOf(transport) as TransportInternals) : undefined;
  if (!proto || typeof proto._send !== 'function' || !('socket' in transport!)) {
    log.warn(
      { code: 'NATS_INTERNALS_CHANGED' },
      'nats transport internals not as expected: socket writes are not coalesced',
    );
    return;
  }
  if (proto[COALESCED]) return;
  const send = proto._send;
  proto._send = function (this: TransportInternals, frame: Uint8Array) {
    const socket = this.socket;
    if (socket && socket.writableCorked === 0 && !socket.destroyed) {
      socket.cork();
      setImmediate(() => socket.uncork());
    }
    return send.call(this, frame);
  };
  proto[COALESCED] = true;
}
