import type { Handler } from '@vab/bus';
import type { Deps } from '../deps.js';

/** Appending to a closed session is allowed: transcripts of the last turns often arrive after the close. */
export const messagesAppend =
  ({ store }: Deps): Handler<'sessions.messages.append'> =>
  async (req) => {
    const seq = await store.appendMessage(req.agentId, req.sessionId, req.message);
    return { seq, message: req.message };
  };
