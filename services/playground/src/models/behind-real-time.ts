/**
 * How far each live voice session's audio is behind real time: its VAD reports, for the frame it just
 * processed, how long ago that frame arrived. Module-wide (the VAD is made deep inside LiveKit's session), keyed
 * by the reporting stream; the load monitor reads the worst, and each session's own.
 */
class BehindRealTime {
  /** Which session the running code belongs to (observability's session context sets it). */
  sessionOf: () => string | undefined = () => undefined;
  private readonly streams = new Map<object, { sessionId: string | undefined; ms: number }>();

  /** A stream's lag now; the first report binds the stream to the session whose work it is. */
  report(stream: object, ms: number): void {
    const s = this.streams.get(stream);
    if (s) s.ms = ms;
    else this.streams.set(stream, { sessionId: this.sessionOf(), ms });
  }

  forget(stream: object): void {
    this.streams.delete(stream);
  }

  /** The worst lag now, and each session's worst. */
  read(): { worstMs: number; bySession: Map<string, number> } {
    let worstMs = 0;
    const bySession = new Map<string, number>();
    for (const { sessionId, ms } of this.streams.values()) {
      worstMs = Math.max(worstMs, ms);
      if (sessionId !== undefined) bySession.set(sessionId, Math.max(bySession.get(sessionId) ?? 0, ms));
    }
    return { worstMs, bySession };
  }
}

export const behindRealTime = new BehindRealTime();
