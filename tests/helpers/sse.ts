/** One Server-Sent Events frame as a client sees it. */
export interface SseFrame {
  id?: string;
  event: string;
  data: string;
}

/**
 * An SSE response read the way a browser's EventSource reads one (frames split on blank lines, comments
 * kept apart), so a test sees what a client would. `stopWhen` ends the read early (the connection is cut).
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
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  const timer = setTimeout(() => void reader.cancel(), opts.timeoutMs ?? 15_000);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const frame: SseFrame = { event: 'message', data: '' };
        let isComment = true;
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) {
            opts.comments?.push(line.slice(1).trim());
            continue;
          }
          isComment = false;
          const [field, ...rest] = line.split(':');
          const value = rest.join(':').replace(/^ /, '');
          if (field === 'id') frame.id = value;
          else if (field === 'event') frame.event = value;
          else if (field === 'data') frame.data += value;
        }
        if (isComment) continue;
        frames.push(frame);
        if (opts.stopWhen?.(frame)) {
          await reader.cancel();
          return frames;
        }
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
