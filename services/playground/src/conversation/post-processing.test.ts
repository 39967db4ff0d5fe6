import type { SessionEventInput } from '@vab/contracts';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { runPostProcessing } from './post-processing.js';

describe('post-processing with a test case mocks', () => {
  it('answers a mocked webhook with its status and never calls it; an unmocked one is called', async () => {
    const called: string[] = [];
    const events: SessionEventInput[] = [];
    const fetch = (async (url: string | URL | Request) => {
      called.push(String(url));
      return new Response(null, { status: 204 });
    }) as typeof globalThis.fetch;
    await runPostProcessing(
      [
        { kind: 'webhook', id: 'crm', url: 'https://crm.example.com/hook', headers: {} },
        { kind: 'webhook', id: 'audit', url: 'https://audit.example.com/hook', headers: {} },
      ],
      [{ role: 'user', content: 'hi' }],
      () => {
        throw new Error('no model is needed');
      },
      {
        fetch,
        webhookTimeoutMs: 1000,
        llmTimeoutMs: 1000,
        log: pino({ level: 'silent' }),
        emit: (e) => events.push(e),
        webhookMocks: { crm: { status: 503 } },
      },
    );
    expect(called).toEqual(['https://audit.example.com/hook']);
    expect(events).toEqual([
      { type: 'post_processing', stepId: 'crm', kind: 'webhook', ok: false, status: 503 },
      { type: 'post_processing', stepId: 'audit', kind: 'webhook', ok: true, status: 204 },
    ]);
  });
});
