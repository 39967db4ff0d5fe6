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
