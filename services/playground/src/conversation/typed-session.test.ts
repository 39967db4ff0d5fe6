import { initializeLogger, voice } from '@livekit/agents';
import { describe, expect, it, vi } from 'vitest';
import { TypedAgentSession } from './typed-session.js';

initializeLogger({ pretty: false, level: 'error' });

/** Starts `session` with a bare agent and watches what its close does with the user's open turn. */
async function startWatched(session: voice.AgentSession) {
  await session.start({ agent: new voice.Agent({ instructions: 'Answer briefly.' }) });
  // LiveKit internals this class relies on (@livekit/agents 1.9.0): the running activity, and the commit of
  // the user's turn that its close makes unless the reason is an error
  const activity = session._activity;
  if (!activity) throw new Error('the session has no activity after start');
  const commit = vi.spyOn(activity, 'commitUserTurn');
  const closed: string[] = [];
  session.on(voice.AgentSessionEventTypes.Close, (ev) => closed.push(String(ev.reason)));
  return { commit, closed };
}

describe('TypedAgentSession', () => {
  it('closes without committing a user turn (the 500 ms wait for a late transcript)', async () => {
    const session = new TypedAgentSession();
    const { commit, closed } = await startWatched(session);
    await session.close();
    expect(commit).not.toHaveBeenCalled();
    expect(closed).toHaveLength(1);
    expect(session._activity).toBeUndefined();
    expect(() => session.say('still there?')).toThrow(/not running/);
    await session.close(); // a second close is a no-op
    expect(closed).toHaveLength(1);
  });

  it("LiveKit's own close still commits the open turn with the audio detached (what voice sessions keep)", async () => {
    const session = new voice.AgentSession({ turnHandling: { turnDetection: 'manual' } });
    const { commit, closed } = await startWatched(session);
    await session.close();
    expect(commit).toHaveBeenCalledWith(expect.objectContaining({ audioDetached: true }));
    expect(closed).toEqual([voice.CloseReason.USER_INITIATED]);
  });
});
