import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { addressKey } from './address-key.js';

/** A listener's default cap of connections one address may hold open at once (MAX_CONNECTIONS_PER_ADDRESS). */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;

/**
 * At most `max` open connections per remote address (an IPv6 address by its /64): one more is closed as it is
 * accepted, before a byte is read, so one address cannot hold the process's file descriptors (issue 35: 19,500
 * trickling sockets from one address took the gateway to its limit). Behind a reverse proxy every client
 * shares its address: raise it or turn it off (0) there, or name the proxy in `exempt` (it caps its clients).
 */
export function capConnections(server: Server, max: number, exempt?: (ip: string) => boolean): void {
  if (max <= 0) return;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    if (exempt?.(socket.remoteAddress ?? '')) return;
    const address = addressKey(socket.remoteAddress ?? '');
    const n = open.get(address) ?? 0;
    if (n >= max) {
      socket.destroy();
      return;
    }
    open.set(address, n + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}
