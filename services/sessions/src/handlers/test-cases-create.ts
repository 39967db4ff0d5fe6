import type { Handler } from '@vab/bus';
import { AppError, type SessionMessage, type TestCase } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';

/** The step path a recorded conversation took: each message's step, repeats in a row folded. */
function observedPath(messages: SessionMessage[]): string[] {
  const path: string[] = [];
  for (const m of messages) if (m.stepId && path.at(-1) !== m.stepId) path.push(m.stepId);
  return path;
}

export const testCasesCreate =
  ({ store, testing, agents }: Deps): Handler<'sessions.cases.create'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    const now = Date.now();
    const body = req.body;
    let made: Pick<TestCase, 'name' | 'turns' | 'expect' | 'fromSession'>;
    if ('fromSession' in body) {
      // replay: the recorded session's user turns, expected to take the path they took then
      const session = await store.getSession(req.agentId, body.fromSession);
      const messages = await store.messagesOf(req.agentId, body.fromSession);
      const turns = messages
        .filter((m) => m.role === 'user' && m.content.trim() !== '')
        .map((m) => m.content);
      if (turns.length === 0) {
        throw new AppError('VALIDATION_FAILED', 'the session has no user turns to replay', {
          issues: [{ path: 'body.fromSession', message: 'has no messages with role "user"' }],
        });
      }
      made = {
        name:
          body.name ??
          `Replay of ${session.sessionType} session ${new Date(session.startedAt).toISOString()}`,
        turns: turns.slice(0, 50),
        expect: { steps: observedPath(messages) },
        fromSession: session.id,
      };
    } else {
      made = { name: body.name, turns: body.turns, expect: body.expect, fromSession: null };
    }
    const created = await testing.createCase({
      id: randomUUID(),
      agentId: req.agentId,
      ...made,
      temperature: body.temperature ?? null,
      createdAt: now,
      updatedAt: now,
    });
    ctx.log.info(
      { agentId: req.agentId, caseId: created.id, replay: created.fromSession !== null },
      'test case created',
    );
    return created;
  };
