import { readFileSync } from 'node:fs';
import { createServer, connect, type Server } from 'node:net';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function listenOn(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

/** Where the kernel picks the local ports of outgoing connections and of `listen(0)` (Linux; its default elsewhere). */
function ephemeralStart(): number {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768
    );
  } catch {
    return 32768;
  }
}

/** The lowest port a range is taken from: above the well-known and common development ports. */
const RANGE_FLOOR = 20_000;

/**
 * `count` consecutive free ports of 127.0.0.1, for a program that binds base…base+count−1 later (npm start's
 * METRICS_PORT_BASE). Taken below the kernel's ephemeral range: there, until the program binds them, any
 * outgoing connection of the machine may take one as its local port (Linux gives `connect()` the even ports
 * and `listen(0)` the odd ones, so a run from `listen(0)` had its even ports taken: a CI run's telephony
 * metrics port, EADDRINUSE). Every port is held until the run is found, so no two picks overlap.
 */
export async function freePortRange(count: number): Promise<number> {
  const top = ephemeralStart() - count;
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = RANGE_FLOOR + Math.floor(Math.random() * Math.max(1, top - RANGE_FLOOR));
    const held: Server[] = [];
    for (let p = base; p < base + count && held.length === p - base; p++) {
      const srv = await listenOn(p);
      if (srv) held.push(srv);
    }
    await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
    if (held.length === count) return base;
  }
  throw new Error(`no ${count} consecutive free ports found`);
}

/** Starts `server` listening on a free port of 127.0.0.1 and resolves to that port. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const addr = server.address();
  return typeof addr === 'object' && addr ? addr.port : 0;
}

/** Polls until `probe` succeeds; never sleeps a fixed time hoping the server is up. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean>,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not become ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Sends `send` (if any) and resolves true when the reply contains `expect`. */
export function tcpProbe(
  port: number,
  send: string | undefined,
  expect: string,
  host = '127.0.0.1',
): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host });
    let buf = '';
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(500, () => done(false));
    sock.on('error', () => done(false));
    sock.on('connect', () => {
      if (send) sock.write(send);
    });
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes(expect)) done(true);
    });
  });
}

/**
 * Counts the writes that reach a socket from now on (each `_write`/`_writev` is one syscall): what a test
 * of write coalescing asserts.
 */
export function countSocketWrites(socket: object): () => number {
  const s = socket as Record<string, unknown>;
  let writes = 0;
  for (const name of ['_write', '_writev']) {
    const original = s[name] as (...a: unknown[]) => unknown;
    s[name] = (...a: unknown[]) => {
      writes++;
      return original.apply(socket, a);
    };
  }
  return () => writes;
}
