import { AppError, type LivekitCredentials } from '@vab/contracts';
import { AccessToken, RoomServiceClient } from 'livekit-server-sdk';

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

function upstream(err: unknown, what: string): AppError {
  const status = (err as { status?: number }).status;
  if (status === 401 || status === 403)
    return new AppError('UPSTREAM_FAILED', `the media server refused the credentials (${what})`);
  if (status !== undefined)
    return new AppError('UPSTREAM_FAILED', `the media server failed to ${what} (${status})`);
  return new AppError('UPSTREAM_FAILED', `the media server is unreachable (${what})`);
}

/** The LiveKit RoomService for one set of credentials, with errors in this API's vocabulary. */
export class MediaServer {
  private readonly rooms: RoomServiceClient;

  constructor(
    readonly creds: LivekitCredentials,
    private readonly timeoutMs: number,
  ) {
    this.rooms = new RoomServiceClient(httpUrlOf(creds.url), creds.apiKey, creds.apiSecret, {
      requestTimeout: timeoutMs / 1000,
    });
  }

  async createRoom(name: string, meta: RoomMetadata, opts: RoomOptions): Promise<void> {
    try {
      await this.rooms.createRoom({
        name,
        emptyTimeout: opts.emptyTimeoutS,
        departureTimeout: opts.departureTimeoutS,
        // the agent does not count: one browser user
        maxParticipants: 1,
        metadata: JSON.stringify(meta),
      });
    } catch (err) {
      throw upstream(err, 'create the room');
    }
  }

  /** Idempotent: a room that is already gone is fine. */
  async deleteRoom(name: string): Promise<void> {
    try {
      await this.rooms.deleteRoom(name);
    } catch (err) {
      if ((err as { status?: number }).status === 404) return;
      throw upstream(err, 'delete the room');
    }
  }

  async listOurRooms(): Promise<{ name: string; meta: RoomMetadata | undefined }[]> {
    try {
      const rooms = await this.rooms.listRooms();
      return rooms
        .filter((r) => r.name.startsWith(ROOM_PREFIX))
        .map((r) => {
          try {
            return { name: r.name, meta: JSON.parse(r.metadata) as RoomMetadata };
          } catch {
            return { name: r.name, meta: undefined };
          }
        });
    } catch (err) {
      throw upstream(err, 'list rooms');
    }
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
