import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { answer, type BusClient, type Logger } from '@vab/bus';
import {
  AppError,
  liveSubject,
  ownerSubject,
  specOf,
  Subjects,
  type EndedDetail,
  type Ok,
  type OwnerVerb,
  type TextTurnResult,
} from '@vab/contracts';
import type { z } from 'zod';
import type { HostedSessionsConfig, UserTurn } from './session-context.js';

/** Turns take a model call or several; a forwarded one waits as long as the route does. */
const FORWARDED_TURN_TIMEOUT_MS = specOf(Subjects.textSessionTurn).timeoutMs!;

export const notFound = (sessionId: string) =>
  new AppError('NOT_FOUND', `text session ${sessionId} not found (ended or expired)`);

/**
 * Requests for a session reach whichever instance of the queue group took them; only its owner can answer.
 * The owner answers on subjects only it holds for the session (`playground.owner.<sessionId>.<verb>`, and
 * `playground.live.<sessionId>` for event streams), and the others forward there: "no responders" then means
 * no instance holds the session.
 */
export class OwnerRouting {
  constructor(
    private readonly deps: {
      nc: NatsConnection;
      bus: BusClient;
      log: Logger;
      config: Pick<HostedSessionsConfig, 'BUS_TIMEOUT_MS' | 'MEDIA_SERVER_TIMEOUT_MS'>;
    },
  ) {}

  /** Answers one of a session's owner subjects here until the subscription is unsubscribed. */
  answer<T extends z.ZodType, R>(
    sessionId: string,
    verb: OwnerVerb,
    schema: T,
    handler: (req: z.output<T>, requestId: string) => Promise<R>,
  ): Subscription {
    const { nc, log } = this.deps;
    return nc.subscribe(ownerSubject(sessionId, verb), {
      callback: (_e, msg) =>
        void answer({
          nc,
          msg,
          log,
          subject: msg.subject,
          schema,
          handler: (req, ctx) => handler(req as z.output<typeof schema>, ctx.requestId),
        }),
    });
  }

  /** A session's event streams ask here whether it still runs (no responders: its instance is gone). */
  live(sessionId: string): Subscription {
    return this.deps.nc.subscribe(liveSubject(sessionId), {
      callback: (_e, msg) => void msg.respond(),
    });
  }

  /** A user turn of a text session another instance holds; NOT_FOUND when none does. */
  forwardTurn(req: UserTurn): Promise<TextTurnResult> {
    const { sessionId, agentId, text, requestId } = req;
    return this.deps.bus.requestTo<TextTurnResult>(
      ownerSubject(sessionId, 'turn'),
      { agentId, sessionId, text },
      { timeoutMs: FORWARDED_TURN_TIMEOUT_MS, requestId, onNoResponders: notFound(sessionId) },
    );
  }

  /** Ends a session another instance holds: true when its owner answered, false when no instance holds it. */
  async forwardEnd(
    sessionId: string,
    agentId: string | undefined,
    requestId: string,
    reason: string,
    detail?: EndedDetail,
  ): Promise<boolean> {
    const { config } = this.deps;
    try {
      await this.deps.bus.requestTo<Ok>(
        ownerSubject(sessionId, 'end'),
        { sessionId, agentId, reason, ...(detail ? { detail } : {}) },
        {
          timeoutMs: config.BUS_TIMEOUT_MS + config.MEDIA_SERVER_TIMEOUT_MS,
          requestId,
          onNoResponders: new AppError('NOT_FOUND', 'no owner'),
        },
      );
      return true;
    } catch (err) {
      if (err instanceof AppError && err.code === 'NOT_FOUND') return false;
      throw err;
    }
  }
}
