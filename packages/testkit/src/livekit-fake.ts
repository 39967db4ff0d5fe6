import { TokenVerifier } from 'livekit-server-sdk';
import { createServer, type Server } from 'node:http';
import { listenOnLoopback } from './ports.js';

export interface FakeRoom {
  name: string;
  emptyTimeout: number;
  departureTimeout: number;
  maxParticipants: number;
  metadata: string;
  creationTime: string;
}

/**
 * A stateful stand-in for LiveKit's Twirp RoomService (CreateRoom, DeleteRoom, ListRooms) over real HTTP:
 * the SDK's JWT is verified with the API secret and its grants enforced, as the real server does. No
 * LiveKit server can run on these machines; this is the boundary the playground talks to.
 */
export async function startLivekitFake(apiKey = 'devkey', apiSecret = 'devsecret-0123456789-abcdefghij') {
  const rooms = new Map<string, FakeRoom>();
  const calls: { method: string; body: Record<string, unknown> }[] = [];
  const verifier = new TokenVerifier(apiKey, apiSecret);
  const server: Server = createServer((req, res) => {
    void (async () => {
      const send = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const method = req.url?.match(/^\/twirp\/livekit\.RoomService\/(\w+)$/)?.[1];
      if (req.method !== 'POST' || !method) return send(404, { code: 'bad_route', msg: 'no such method' });
      let grants: Awaited<ReturnType<TokenVerifier['verify']>>;
      try {
        grants = await verifier.verify((req.headers.authorization ?? '').replace(/^Bearer /, ''));
      } catch {
        return send(401, { code: 'unauthenticated', msg: 'invalid token' });
      }
      let raw = '';
      for await (const c of req) raw += c;
      const body = (raw ? JSON.parse(raw) : {}) as Record<string, unknown>;
      calls.push({ method, body });
      const need = method === 'ListRooms' ? grants.video?.roomList : grants.video?.roomCreate;
      if (!need) return send(403, { code: 'permission_denied', msg: 'missing grant' });
      if (method === 'CreateRoom') {
        const name = String(body.name);
        const room: FakeRoom = {
          name,
          emptyTimeout: Number(body.emptyTimeout ?? 0),
          departureTimeout: Number(body.departureTimeout ?? 0),
          maxParticipants: Number(body.maxParticipants ?? 0),
          metadata: String(body.metadata ?? ''),
          creationTime: String(Math.floor(Date.now() / 1000)),
        };
        rooms.set(name, room); // create-or-update, as the real server
        return send(200, { sid: `RM_${name}`, ...room });
      }
      if (method === 'DeleteRoom') {
        if (!rooms.delete(String(body.room)))
          return send(404, { code: 'not_found', msg: 'requested room does not exist' });
        return send(200, {});
      }
      if (method === 'ListRooms') {
        const names = body.names as string[] | undefined;
        return send(200, {
          rooms: [...rooms.values()]
            .filter((r) => !names?.length || names.includes(r.name))
            .map((r) => ({ sid: `RM_${r.name}`, ...r })),
        });
      }
      return send(404, { code: 'bad_route', msg: 'no such method' });
    })();
  });
  const port = await listenOnLoopback(server);
  return {
    url: `ws://127.0.0.1:${port}`,
    apiKey,
    apiSecret,
    rooms,
    calls,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
