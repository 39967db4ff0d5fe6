import { AppError, type LivekitCredentials } from '@vab/contracts';
import { AccessToken, type VideoGrant } from 'livekit-server-sdk';

/** Rooms this service creates carry this prefix, so the reaper can tell them from anyone else's. */
export const ROOM_PREFIX = 'vab-pg-';

export interface RoomMetadata {
  /** The playground instance that runs the room's agent. */
  owner: string;
  agentId?: string | undefined;
  testSessionId?: string | undefined;
  startedAt: number;
}

export interface RoomOptions {
  emptyTimeoutS: number;
  departureTimeoutS: number;
}

/** The Twirp API takes the http(s) form of the server URL the browser dials as ws(s). */
export function httpUrlOf(url: string): string {
  return url.replace(/^ws(s?):\/\//, 'http$1://');
}

/** An HTTP answer other than 2xx from the media server. */
class TwirpStatus extends Error {
  constructor(readonly status: number) {
    super(`media server answered ${status}`);
  }
}

/**
 * One error per way of failing, and never one that tells a closed port from an open one that does not
 * speak HTTP, a reset, a timeout or a refused address: all of them are "unreachable".
 */
function upstream(err: unknown, what: string): AppError {
  const status = err instanceof TwirpStatus ? err.status : undefined;
  if (status === 401 || status === 403)
    return new AppError('UPSTREAM_FAILED', `the media server refused the credentials (${what})`);
  if (status !== undefined)
    return new AppError('UPSTREAM_FAILED', `the media server failed to ${what} (${status})`);
  return new AppError('UPSTREAM_FAILED', `the media server is unreachable (${what})`);
}

interface TwirpRoom {
  name?: string;
  metadata?: string;
}

/**
 * The LiveKit RoomService for one set of credentials, with errors in this API's vocabulary. It speaks
 * Twirp (JSON) itself rather than through livekit-server-sdk's RoomServiceClient: that client calls the
 * global `fetch`, follows redirects and fails over to the regions a server names — none of which a
 * media server URL from a request may steer. Here every call goes through the `fetch` it is given (the
 * egress-checked one for a URL the request named), a 30x is an answer, and there is no failover.
 */
export class MediaServer {
  private readonly base: string;

  constructor(
    readonly creds: LivekitCredentials,
    private readonly timeoutMs: number,
    private readonly fetch: typeof globalThis.fetch,
  ) {
    // the Twirp API lives at the server's root, as the SDK's own client calls it: a path in the URL is dropped
    this.base = URL.canParse(httpUrlOf(creds.url)) ? new URL(httpUrlOf(creds.url)).origin : creds.url;
  }

  private async call(method: string, grant: VideoGrant, body: object): Promise<unknown> {
    const at = new AccessToken(this.creds.apiKey, this.creds.apiSecret, { ttl: 600 });
    at.addGrant(grant);
    const res = await this.fetch(`${this.base}/twirp/livekit.RoomService/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await at.toJwt()}` },
      body: JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw new TwirpStatus(res.status);
    }
    return res.json();
  }

  async createRoom(name: string, meta: RoomMetadata, opts: RoomOptions): Promise<void> {
    try {
      await this.call(
        'CreateRoom',
        { roomCreate: true },
        {
          name,
          emptyTimeout: opts.emptyTimeoutS,
          departureTimeout: opts.departureTimeoutS,
          // the agent does not count: one browser user
          maxParticipants: 1,
          metadata: JSON.stringify(meta),
        },
      );
    } catch (err) {
      throw upstream(err, 'create the room');
    }
  }

  /** Idempotent: a room that is already gone is fine. */
  async deleteRoom(name: string): Promise<void> {
    try {
      await this.call('DeleteRoom', { roomCreate: true }, { room: name });
    } catch (err) {
      if (err instanceof TwirpStatus && err.status === 404) return;
      throw upstream(err, 'delete the room');
    }
  }

  async listOurRooms(): Promise<{ name: string; meta: RoomMetadata | undefined }[]> {
    let rooms: TwirpRoom[];
    try {
      rooms = ((await this.call('ListRooms', { roomList: true }, {})) as { rooms?: TwirpRoom[] }).rooms ?? [];
    } catch (err) {
      throw upstream(err, 'list rooms');
    }
    return rooms
      .filter((r): r is TwirpRoom & { name: string } => typeof r.name === 'string')
      .filter((r) => r.name.startsWith(ROOM_PREFIX))
      .map((r) => {
        try {
          return { name: r.name, meta: JSON.parse(r.metadata ?? '') as RoomMetadata };
        } catch {
          return { name: r.name, meta: undefined };
        }
      });
  }

  /** The browser's token: this room only, a random identity, a short life. */
  async userToken(room: string, ttlS: number, identity: string): Promise<string> {
    const at = new AccessToken(this.creds.apiKey, this.creds.apiSecret, { identity, ttl: ttlS });
    at.addGrant({ roomJoin: true, room, canPublish: true, canSubscribe: true, canPublishData: true });
    return at.toJwt();
  }

  /** The in-process agent's token: an agent participant (never keeps the room open, not counted). */
  async agentToken(room: string, identity: string): Promise<string> {
    const at = new AccessToken(this.creds.apiKey, this.creds.apiSecret, { identity, ttl: 6 * 3600 });
    at.kind = 'agent';
    at.addGrant({
      roomJoin: true,
      room,
      agent: true,
      canPublish: true,
      canSubscribe: true,
      canPublishData: true,
    });
    return at.toJwt();
  }
}
