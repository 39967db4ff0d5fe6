import { EventSourceParserStream } from 'eventsource-parser/stream';

/** One Server-Sent Events frame as a client sees it. */
export interface SseFrame {
  id?: string;
  event: string;
  data: string;
}

/**
 * An SSE response read the way a browser's EventSource reads one (eventsource-parser, the parser the console
 * uses too), so a test sees what a client would: comments kept apart, an event without a name is `message`.
 * `stopWhen` ends the read early (the connection is cut).
 */
export async function readSse(
  res: Response,
  opts: {
    stopWhen?: (f: SseFrame) => boolean;
    comments?: string[];
    timeoutMs?: number;
    /** Filled as frames arrive, for a test that waits on them while the stream is still open. */
    frames?: SseFrame[];
  } = {},
): Promise<SseFrame[]> {
  const frames: SseFrame[] = opts.frames ?? [];
  const reader = res
    .body!.pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream({ onComment: (c) => opts.comments?.push(c.trim()) }))
    .getReader();
  const timer = setTimeout(() => void reader.cancel(), opts.timeoutMs ?? 15_000);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const frame: SseFrame = { event: value.event ?? 'message', data: value.data };
      if (value.id !== undefined) frame.id = value.id;
      frames.push(frame);
      if (opts.stopWhen?.(frame)) {
        await reader.cancel();
        break;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  return frames;
}

export const eventsOf = (frames: SseFrame[]) =>
  frames
    .filter((f) => f.id !== undefined)
    .map((f) => JSON.parse(f.data) as { id: number; type: string } & Record<string, unknown>);
