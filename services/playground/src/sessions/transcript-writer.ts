import { BusClient, safeError, type Logger } from '@vab/bus';
import { Subjects, type CloseReport, type SessionMessage } from '@vab/contracts';
import type { Redactor } from './redactor.js';

export interface TranscriptWriterOptions {
  bus: BusClient;
  agentId: string;
  sessionId: string;
  startedAt: number;
  log: Logger;
  timeoutMs: number;
  /** The session's credentials, removed from every message before it is stored. */
  redactor?: Redactor | undefined;
  /**
   * Where the transcript goes when it is not a test session's (a call's: `sessions.calls.append|end`); the
   * test session's subjects otherwise.
   */
  sink?: TranscriptSink | undefined;
}

/** A record other than a test session that keeps a transcript and is closed once. */
export interface TranscriptSink {
  append(message: SessionMessage): Promise<unknown>;
  close(endedAt: number, report: CloseReport | undefined): Promise<unknown>;
}

/**
 * Writes one session's transcript to the sessions service, in order and never blocking the conversation
 * (a message it cannot write is logged), and closes the test session once, after the last message. Its bus
 * requests carry the session's id as their request id: they run on their own, not on behalf of one request,
 * and their lines are found by the session.
 */
export class TranscriptWriter {
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  readonly agentId: string;
  readonly sessionId: string;
  readonly startedAt: number;

  constructor(private readonly opts: TranscriptWriterOptions) {
    this.agentId = opts.agentId;
    this.sessionId = opts.sessionId;
    this.startedAt = opts.startedAt;
  }

  write(sent: SessionMessage): void {
    const message = this.opts.redactor ? this.opts.redactor.deep(sent) : sent;
    this.chain = this.chain.then(async () => {
      try {
        if (this.opts.sink) await this.opts.sink.append(message);
        else
          await this.opts.bus.request(
            Subjects.messagesAppend,
            { agentId: this.agentId, sessionId: this.sessionId, message },
            { timeoutMs: this.opts.timeoutMs, requestId: this.sessionId },
          );
      } catch (err) {
        this.opts.log.warn(
          { code: 'MESSAGE_NOT_RECORDED', err: safeError(err), role: message.role, stepId: message.stepId },
          'message not recorded',
        );
      }
    });
  }

  /**
   * Closes the test session (once) with what it used and the errors it saw. Answers the duration the record
   * was closed with (the session_ended event says the same); undefined when it was closed before.
   */
  async close(report?: CloseReport): Promise<number | undefined> {
    if (this.closed) return undefined;
    this.closed = true;
    await this.chain;
    const endedAt = Math.max(Date.now(), this.startedAt);
    try {
      if (this.opts.sink) await this.opts.sink.close(endedAt, report);
      else
        await this.opts.bus.request(
          Subjects.testSessionsClose,
          {
            agentId: this.agentId,
            sessionId: this.sessionId,
            close: { endedAt, durationMs: endedAt - this.startedAt },
            ...(report ? { report } : {}),
          },
          { timeoutMs: this.opts.timeoutMs, requestId: this.sessionId },
        );
    } catch (err) {
      this.opts.log.warn({ code: 'TEST_SESSION_NOT_CLOSED', err: safeError(err) }, 'test session not closed');
    }
    return endedAt - this.startedAt;
  }
}
