import type { voice } from '@livekit/agents';

/** LiveKit exports the type of a session's text output but not its class: this is its shape. */
type TextOutput = NonNullable<voice.AgentSession['output']['transcription']>;
type TimedText = Parameters<TextOutput['captureText']>[0];

/**
 * Sits in the session's text output chain (in front of LiveKit's own in a room) and reports the agent's reply
 * as the model streams it. Deltas of one event-loop turn go out as one (a model often sends a burst), so a
 * fast reply costs a few events, not one per token. Each reply (a text segment) gets an id; the final
 * `agent_reply` event takes the id of the segment that produced it.
 */
export class ReplyTap {
  private segment = 0;
  private open = false;
  private buffered = '';
  private scheduled: NodeJS.Immediate | undefined;
  /** Finished segments whose final reply has not been reported yet, oldest first. */
  private readonly done: { id: string; text: string }[] = [];
  private text = '';

  constructor(private readonly onDelta: (replyId: string, delta: string) => void) {}

  attach(session: voice.AgentSession): void {
    const next = session.output.transcription;
    const tap = {
      nextInChain: next ?? undefined,
      captureText: async (t: TimedText) => {
        this.capture(typeof t === 'string' ? t : t.text);
        await next?.captureText(t);
      },
      flush: () => {
        this.flush();
        next?.flush();
      },
      onAttached: () => next?.onAttached(),
      onDetached: () => next?.onDetached(),
    };
    session.output.transcription = tap as unknown as TextOutput;
  }

  private get id(): string {
    return `r${this.segment}`;
  }

  private capture(delta: string): void {
    if (delta === '') return;
    if (!this.open) {
      this.open = true;
      this.segment++;
      this.text = '';
    }
    this.buffered += delta;
    this.text += delta;
    this.scheduled ??= setImmediate(() => this.send());
  }

  private send(): void {
    this.scheduled = undefined;
    if (this.buffered === '') return;
    const delta = this.buffered;
    this.buffered = '';
    this.onDelta(this.id, delta);
  }

  private flush(): void {
    if (!this.open) return;
    clearImmediate(this.scheduled);
    this.send();
    this.open = false;
    this.done.push({ id: this.id, text: this.text });
    if (this.done.length > 16) this.done.shift();
  }

  /** The text of the reply streamed last (open or finished): what an interrupted reply is cut from. */
  lastText(): string | undefined {
    return this.text === '' ? undefined : this.text;
  }

  /**
   * The id of the streamed segment a final reply came from (a new one when none streamed, e.g. no output). An
   * interrupted reply is final cut where playback stopped: the segment it came from (the latest) starts with it.
   */
  replyIdOf(text: string): string {
    const final = text.trim();
    const i = this.done.findIndex((d) => d.text.trim() === final);
    if (i >= 0) return this.done.splice(0, i + 1).at(-1)!.id;
    if (this.open && this.text.trim() === final) return this.id;
    const latest = this.open ? { id: this.id, text: this.text } : this.done.at(-1);
    if (final !== '' && latest?.text.trimStart().startsWith(final)) {
      if (!this.open) this.done.pop();
      return latest.id;
    }
    this.segment++;
    return this.id;
  }
}
