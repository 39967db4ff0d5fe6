import type { ConsumerMessages } from '@nats-io/jetstream';
import { safeError, type Logger } from '@vab/bus';
import type { SessionEvent } from '@vab/contracts';

/** One open stream, as a feed sees it. */
export interface FeedReader {
  /**
   * An event: its SSE frame, and its JSON as stored (for a reader that sends it otherwise: nothing parses
   * the frame again). The reader drops ids it has already sent.
   */
  push(id: number, frame: string, json: string): void;
  /** The feed is over: the session ended, its instance is gone, or the feed failed. */
  finish(closing?: string): void;
}

/** What a feed says about its session when nothing new comes: still running, ended quietly, or gone. */
export type OwnerState = 'alive' | 'closed' | 'lost';

export interface FeedOptions {
  sessionId: string;
  /** Every event with an id above this comes through the feed (0: the whole session). */
  base: number;
  /** Whether `messages` starts at the newest stored event: nothing to catch up on. */
  atLiveEdge: boolean;
  /** Most bytes of frames kept for readers that join later; past it the oldest go and `base` moves up. */
  bufferBytes: number;
  /** How often a quiet feed asks whether its session still runs. */
  checkEveryMs: number;
  /** Asks whether the session still runs, given the newest event id seen. */
  ownerState(lastId: number): Promise<OwnerState>;
  /** The frame that ends readers when the session is lost, given the newest event id seen. */
  lostFrame(lastId: number): string;
  log: Logger;
  /** Called once when the feed stops (it is then no one's to join). */
  onClose(): void;
}

/**
 * One JetStream consumer over a session's events, shared by every stream of that session on this gateway:
 * 1,000 viewers of one live session cost one consumer and one JSON parse per event, not 1,000 of each
 * (docs/performance.md). Events are kept (bounded) so a reader that joins late replays from memory, and the
 * session's owner is asked once per feed rather than once per reader.
 */
export class SessionFeed {
  private readonly frames: { id: number; frame: string; json: string }[] = [];
  private bufferedBytes = 0;
  private readonly readers = new Set<FeedReader>();
  private base: number;
  private lastId: number;
  private heard = Date.now();
  private checking = false;
  private closed = false;
  private messages: ConsumerMessages | undefined;
  private readonly timer: NodeJS.Timeout;
  /** Resolves once the consumer is open; rejects (and the feed is closed) when it cannot be. */
  readonly ready: Promise<void>;

  constructor(
    consume: () => Promise<ConsumerMessages | undefined>,
    private readonly opts: FeedOptions,
  ) {
    this.base = opts.base;
    this.lastId = opts.base;
    this.timer = setInterval(() => {
      if (Date.now() - this.heard >= opts.checkEveryMs) this.checkOwner();
    }, opts.checkEveryMs);
    this.timer.unref();
    this.ready = consume().then(
      (messages) => {
        if (this.closed) {
          void messages?.close().catch(() => undefined);
          return;
        }
        this.messages = messages;
        // no stream, or nothing to catch up on: is anyone still running the session?
        if (!messages || opts.atLiveEdge) this.checkOwner();
        if (messages) void this.run(messages);
      },
      (err: unknown) => {
        this.close();
        throw err;
      },
    );
  }

  /** Whether a reader that has every event up to `after` can be served from here. */
  covers(after: number): boolean {
    return !this.closed && after >= this.base;
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** The reader gets every kept event after `after` now, then each new one as it comes. */
  attach(reader: FeedReader, after: number): void {
    // added first: a reader cut off while catching up detaches like any other
    this.readers.add(reader);
    for (const f of this.frames) {
      if (!this.readers.has(reader)) return;
      if (f.id > after) reader.push(f.id, f.frame, f.json);
    }
  }

  /** A feed made for a reader that left before it attached: stopped unless another reader reads it. */
  dropIfUnread(): void {
    if (this.readers.size === 0) this.close();
  }

  /** The reader has gone; the feed stops with its last reader. */
  detach(reader: FeedReader): void {
    this.readers.delete(reader);
    if (this.readers.size === 0) this.close();
  }

  private async run(messages: ConsumerMessages): Promise<void> {
    let caughtUp = this.opts.atLiveEdge;
    try {
      for await (const m of messages) {
        this.heard = Date.now();
        const event = m.json<SessionEvent>();
        if (event.id > this.lastId) {
          this.lastId = event.id;
          // the stored JSON is sent as it is: one line, parsed once here for its id and type only
          const json = m.string();
          const frame = `id: ${event.id}\nevent: ${event.type}\ndata: ${json}\n\n`;
          this.keep({ id: event.id, frame, json });
          for (const r of this.readers) r.push(event.id, frame, json);
        }
        if (event.type === 'session_ended') break;
        if (!caughtUp && m.info.pending === 0) {
          caughtUp = true;
          this.checkOwner();
        }
      }
    } catch (err) {
      if (!this.closed)
        this.opts.log.warn(
          { code: 'EVENT_STREAM_FAILED', err: safeError(err), sessionId: this.opts.sessionId },
          'event stream failed',
        );
    }
    this.finish();
  }

  private keep(kept: { id: number; frame: string; json: string }): void {
    this.frames.push(kept);
    // the frame's length counts (its JSON is the same text the frame was made of)
    this.bufferedBytes += kept.frame.length;
    while (this.bufferedBytes > this.opts.bufferBytes && this.frames.length > 0) {
      const oldest = this.frames.shift()!;
      this.bufferedBytes -= oldest.frame.length;
      this.base = oldest.id;
    }
  }

  private checkOwner(): void {
    if (this.checking || this.closed) return;
    this.checking = true;
    void this.opts
      .ownerState(this.lastId)
      .then((state) => {
        if (state === 'closed') this.finish();
        else if (state === 'lost') this.finish(this.opts.lostFrame(this.lastId));
      })
      .catch(() => undefined)
      .finally(() => {
        this.checking = false;
      });
  }

  /** Ends every reader (with a last frame, if any) and the feed. */
  private finish(closing?: string): void {
    const readers = [...this.readers];
    this.readers.clear();
    this.close();
    for (const r of readers) r.finish(closing);
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    void this.messages?.close().catch(() => undefined);
    this.opts.onClose();
  }
}
