import { BusClient, safeError, type Logger } from '@vab/bus';
import { Subjects, type SessionMessage } from '@vab/contracts';

/**
 * Writes one session's transcript to the sessions service, in order and never blocking the conversation
 * (a message it cannot write is logged), and closes the test session once, after the last message.
 */
export class Recorder {
  private chain: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly bus: BusClient,
    readonly agentId: string,
    readonly sessionId: string,
    readonly startedAt: number,
    private readonly log: Logger,
    private readonly timeoutMs: number,
  ) {}

  record(message: SessionMessage): void {
    this.chain = this.chain.then(async () => {
      try {
        await this.bus.request(
          Subjects.messagesAppend,
          { agentId: this.agentId, sessionId: this.sessionId, message },
          { timeoutMs: this.timeoutMs, requestId: this.sessionId },
        );
      } catch (err) {
        this.log.warn(
          { err: safeError(err), role: message.role, stepId: message.stepId },
          'message not recorded',
        );
      }
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.chain;
    const endedAt = Math.max(Date.now(), this.startedAt);
    try {
      await this.bus.request(
        Subjects.testSessionsClose,
        {
          agentId: this.agentId,
          sessionId: this.sessionId,
          close: { endedAt, durationMs: endedAt - this.startedAt },
        },
        { timeoutMs: this.timeoutMs, requestId: this.sessionId },
      );
    } catch (err) {
      this.log.warn({ err: safeError(err) }, 'test session not closed');
    }
  }
}
