import { ApiError, createApiClient, etagOf, ok, type Schemas } from '@vab/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sampleFlow, startStack, type Stack } from '../../helpers/stack.js';

const TOKEN = 'builder-token-0123456789';
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({ security: { apiTokens: [TOKEN] } });
});
afterAll(() => stack.close());

describe('the typed client, as a builder front end uses it', () => {
  it('creates, autosaves with If-Match, lists, chats, tests, deploys and archives', async () => {
    const api = createApiClient({ baseUrl: stack.baseUrl, token: TOKEN });

    // create (a retry with the same Idempotency-Key creates nothing new)
    const created = await api.POST('/api/agents', {
      body: { name: 'Front desk', flow: sampleFlow() },
      params: { header: { 'idempotency-key': 'create-front-desk-1' } },
    });
    expect(created.response.status).toBe(201);
    const agent: Schemas['Agent'] = created.data!;
    const retry = await api.POST('/api/agents', {
      body: { name: 'Front desk', flow: sampleFlow() },
      params: { header: { 'idempotency-key': 'create-front-desk-1' } },
    });
    expect(retry.data?.id).toBe(agent.id);

    // autosave: each save carries the ETag of the last answer; a stale one is refused with a typed error
    let etag = etagOf(created.response)!;
    for (const command of ['Hi!', 'Hello!', 'Hello there!']) {
      const base = sampleFlow();
      const flow = { ...base, nodes: base.nodes.map((n) => (n.id === 'start-1' ? { ...n, command } : n)) };
      const saved = await api.PATCH('/api/agents/{id}', {
        params: { path: { id: agent.id }, header: { 'if-match': etag } },
        body: { flow },
      });
      expect(saved.response.status).toBe(200);
      etag = etagOf(saved.response)!;
    }
    const stale = await api.PATCH('/api/agents/{id}', {
      params: { path: { id: agent.id }, header: { 'if-match': etagOf(created.response)! } },
      body: { name: 'Lost update' },
    });
    expect(stale.response.status).toBe(412);
    expect(stale.error?.code).toBe('PRECONDITION_FAILED');
    await expect(
      ok(api.GET('/api/agents/{id}', { params: { path: { id: 'no-such-agent' } } })),
    ).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });

    // list
    const listed = await ok(api.GET('/api/agents'));
    expect(listed.find((a) => a.id === agent.id)?.name).toBe('Front desk');
    expect(
      await ok(api.GET('/api/agents/{id}/versions', { params: { path: { id: agent.id } } })),
    ).toHaveLength(4);

    // builder chat
    await ok(
      api.POST('/api/agents/{id}/conversations', {
        params: { path: { id: agent.id } },
        body: { role: 'user', content: 'Greet callers warmly', nodeAttachments: ['start-1'] },
      }),
    );
    const chat = await ok(api.GET('/api/agents/{id}/conversations', { params: { path: { id: agent.id } } }));
    expect(chat.map((e) => e.content)).toEqual(['Greet callers warmly']);

    // a test session with its transcript, closed
    const session = await ok(
      api.POST('/api/agents/{id}/test-sessions', {
        params: { path: { id: agent.id } },
        body: { sessionType: 'voice', roomName: 'vab-pg-client-test' },
      }),
    );
    for (const [i, role] of ['assistant', 'user'].entries()) {
      await ok(
        api.POST('/api/agents/{id}/test-sessions/{sessionId}/messages', {
          params: { path: { id: agent.id, sessionId: session.id } },
          body: { role, content: `line ${i}`, stepId: 'start-1', timestamp: session.startedAt + i },
        }),
      );
    }
    await ok(
      api.PATCH('/api/agents/{id}/test-sessions/{sessionId}', {
        params: { path: { id: agent.id, sessionId: session.id } },
        body: { endedAt: session.startedAt + 5000, durationMs: 5000 },
      }),
    );
    const transcript = await ok(
      api.GET('/api/agents/{id}/test-sessions/{sessionId}/messages', {
        params: { path: { id: agent.id, sessionId: session.id } },
      }),
    );
    expect(transcript.map((m) => m.content)).toEqual(['line 0', 'line 1']);

    // deploy, then live, as an external deployer moves it (the pipeline leaves an `external` record alone)
    const deploy = await ok(
      api.POST('/api/agents/{id}/deploys', { params: { path: { id: agent.id } }, body: { external: true } }),
    );
    expect(deploy).toMatchObject({ deployNumber: 1, version: 4, status: 'pending' });
    for (const status of ['building', 'live'] as const) {
      await ok(
        api.PATCH('/api/agents/{id}/deploys/{deployId}', {
          params: { path: { id: agent.id, deployId: deploy.id } },
          body: { status },
        }),
      );
    }

    // archive: gone from the list
    await ok(api.DELETE('/api/agents/{id}', { params: { path: { id: agent.id } } }));
    expect((await ok(api.GET('/api/agents'))).some((a) => a.id === agent.id)).toBe(false);
  });

  it('without the token, every call is a typed 401', async () => {
    const anonymous = createApiClient({ baseUrl: stack.baseUrl });
    const err = await ok(anonymous.GET('/api/agents')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
  });
});
