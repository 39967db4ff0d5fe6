import type { Handler } from '@vab/bus';
import { AppError, type SessionMessage, type TestCase } from '@vab/contracts';
import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { checkMocks } from '../testing/case-checks.js';

/** The step path a recorded conversation took: each message's step, repeats in a row folded. */
function observedPath(messages: SessionMessage[]): string[] {
  const path: string[] = [];
  for (const m of messages) if (m.stepId && path.at(-1) !== m.stepId) path.push(m.stepId);
  return path;
}

export const testCasesCreate =
  ({ store, testing, agents }: Deps): Handler<'sessions.test-cases.create'> =>
  async (req, ctx) => {
    await agents.requireActive(req.agentId, ctx.requestId);
    const now = Date.now();
    const body = req.body;
    if (body.mocks) checkMocks(body.mocks, await agents.latestFlow(req.agentId, ctx.requestId), 'body');
    let made: Pick<TestCase, 'name' | 'turns' | 'expect' | 'fromSession' | 'simulation'>;
    if (body.fromSession != null) {
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
        simulation: null,
      };
    } else {
      // the body's own check made sure a case without fromSession has a name and turns or a simulation
      made = {
        name: body.name!,
        turns: body.simulation ? [] : (body.turns ?? []),
        expect: body.expect ?? {},
        fromSession: null,
        simulation: body.simulation ?? null,
      };
    }
    const created = await testing.createCase({
      id: randomUUID(),
      agentId: req.agentId,
      ...made,
      temperature: body.temperature ?? null,
      mocks: body.mocks ?? {},
      criteria: body.criteria ?? [],
      judgeModel: body.judgeModel ?? null,
      repeat: body.repeat ?? 1,
      minPassRate: body.minPassRate ?? 1,
      createdAt: now,
      updatedAt: now,
    });
    ctx.log.info(
      {
        agentId: req.agentId,
        caseId: created.id,
        replay: created.fromSession !== null,
        simulated: created.simulation !== null,
      },
      'test case created',
    );
    return created;
  };
