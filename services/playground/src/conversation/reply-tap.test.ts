import type { voice } from '@livekit/agents';
import { describe, expect, it } from 'vitest';
import { ReplyTap } from './reply-tap.js';

type Out = { captureText(t: string): Promise<void>; flush(): void };

/** A tap on a session with no text output of its own; what it reported, and its end of the chain. */
function tapped() {
  const deltas: { replyId: string; delta: string }[] = [];
  const tap = new ReplyTap((replyId, delta) => deltas.push({ replyId, delta }));
  const session = { output: { transcription: null } } as unknown as voice.AgentSession;
  tap.attach(session);
  const out = session.output.transcription as unknown as Out;
  const say = async (...parts: string[]) => {
    for (const p of parts) await out.captureText(p);
    await new Promise((r) => setImmediate(r));
  };
  return { tap, deltas, out, say };
}

describe('the reply id of a final reply', () => {
  it('is the id its deltas had, whole or cut where an interruption stopped playback', async () => {
    const { tap, deltas, out, say } = tapped();
    await say('Hello ', 'there.');
    out.flush();
    expect(tap.replyIdOf('Hello there.')).toBe(deltas[0]!.replyId);

    await say('We have appointments ', 'on Monday and Tuesday.');
    // the caller talked over it: the final reply is what was heard, while the segment is still open
    const cut = tap.replyIdOf('We have appointments');
    expect(cut).toBe(deltas.at(-1)!.replyId);
    expect(cut).not.toBe(deltas[0]!.replyId);
    out.flush();

    await say('Anything else?');
    out.flush();
    // cut after the segment was flushed: still the latest segment's
    expect(tap.replyIdOf('Anything')).toBe(deltas.at(-1)!.replyId);
    // a reply that streamed nothing gets an id of its own
    const unseen = tap.replyIdOf('Goodbye.');
    expect(new Set(deltas.map((d) => d.replyId)).has(unseen)).toBe(false);
  });
});
