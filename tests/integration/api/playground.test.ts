import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fullFlow, withoutNode } from '@vab/testkit';
import { api, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;
const dir = mkdtempSync(join(tmpdir(), 'vab-pg-'));
const envFile = join(dir, '.env');

beforeAll(async () => {
  stack = await startStack({
    envFile,
    providerEnv: { OPENAI_API_KEY: 'sk-process-secret', LIVEKIT_URL: 'wss://lk' },
  });
  http = api(stack.baseUrl);
});
afterAll(async () => {
  await stack.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('POST /api/flows/validate', () => {
  it('answers valid for a runnable flow', async () => {
    const res = await http.post('/api/flows/validate', fullFlow());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      valid: true,
      sessionType: 'voice',
      issues: [],
      // the server has an OpenAI key; the others must come with the request
      requirements: [
        { provider: 'openai', nodeIds: ['llm'], key: 'server' },
        { provider: 'elevenlabs', nodeIds: ['tts'], key: 'request' },
        { provider: 'deepgram', nodeIds: ['stt'], key: 'request' },
      ],
    });
  });

  it('lists every problem with its code and node id', async () => {
    const res = await http.post('/api/flows/validate', withoutNode(withoutNode(fullFlow(), 'tts'), 'start'));
    expect(res.status).toBe(200);
    expect(res.body.valid).toBe(false);
    expect(res.body.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ code: 'MISSING_TTS', nodeId: 'agent' }),
        expect.objectContaining({ code: 'NO_START' }),
      ]),
    );
  });

  it('answers 400 for a body that is not a flow', async () => {
    const res = await http.post('/api/flows/validate', { nodes: [{ nodeType: 'agent' }] });
    expect(res.status).toBe(400);
    expect(res.body.issues.map((i: { path: string }) => i.path)).toEqual(
      expect.arrayContaining(['body.nodes.0.id', 'body.edges']),
    );
  });
});

describe('GET /api/env-keys', () => {
  it('reports booleans only, and an edited env file shows at once', async () => {
    const first = await http.get('/api/env-keys');
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      envKeys: { openai: true, anthropic: false, elevenlabs: false, deepgram: false, livekit: false },
      setupRequired: true,
    });
    writeFileSync(
      envFile,
      'ANTHROPIC_API_KEY=sk-ant-file-secret\nDEEPGRAM_API_KEY=dg\nELEVENLABS_API_KEY=el\nLIVEKIT_API_KEY=k\nLIVEKIT_API_SECRET=s\n',
    );
    const second = await http.get('/api/env-keys');
    expect(second.body).toEqual({
      envKeys: { openai: true, anthropic: true, elevenlabs: true, deepgram: true, livekit: true },
      setupRequired: false,
    });
    writeFileSync(envFile, 'OPENAI_API_KEY=\n');
    expect((await http.get('/api/env-keys')).body.envKeys.openai).toBe(false);
    const everything = JSON.stringify([first, second]) + stack.logs.join('\n');
    for (const secret of ['sk-process-secret', 'sk-ant-file-secret'])
      expect(everything).not.toContain(secret);
  });
});
