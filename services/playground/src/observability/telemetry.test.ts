import { log } from '@livekit/agents';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { inSession, logLiveKitAs } from './telemetry.js';

/** Lines written to a sink, parsed. */
function sink(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l) as never);
      done();
    },
  });
  return { lines, stream };
}

describe("LiveKit Agents' log lines", () => {
  it('never carry what LiveKit marks as personal data (a transcript, a tool call, a message)', async () => {
    const { lines, stream } = sink();
    logLiveKitAs('info', stream);
    log().warn({ 'lk.pii.user_input': 'my card is 4111 1111' }, 'skipping reply to user input');
    log()
      .child({ 'lk.pii.message': { transcript: 'my card is 4111 1111' } })
      .warn('unexpected message');
    await expect.poll(() => lines.length).toBe(2);
    expect(JSON.stringify(lines)).not.toContain('4111');
    expect(lines.map((l) => l.msg)).toEqual(['skipping reply to user input', 'unexpected message']);
  });

  it("are in the stack's format, name the session they were written in, and carry no stack trace", async () => {
    const { lines, stream } = sink();
    logLiveKitAs('info', stream);
    // as LiveKit logs: a child of `log()` made in a session's constructor, written later from its tasks
    await inSession({ sessionId: 'ts-1', agentId: 'ag-1', requestId: 'req-1' }, async () => {
      const logger = log().child({ participant: 'agent' });
      await new Promise((r) => setTimeout(r, 1));
      logger.error({ error: new Error('model answered 500') }, 'Error in _llmInferenceTask');
    });
    log().warn('outside any session');
    await expect.poll(() => lines.length).toBe(2);
    const [inside, outside] = lines;
    expect(inside).toMatchObject({
      service: 'playground',
      component: 'livekit',
      sessionId: 'ts-1',
      agentId: 'ag-1',
      requestId: 'req-1',
      participant: 'agent',
      msg: 'Error in _llmInferenceTask',
      error: { type: 'Error', message: 'model answered 500' },
    });
    expect(inside!.time).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(JSON.stringify(inside)).not.toContain('at ');
    expect(outside).not.toHaveProperty('sessionId');
    expect(outside).toMatchObject({ level: 40, msg: 'outside any session' });
  });
});
