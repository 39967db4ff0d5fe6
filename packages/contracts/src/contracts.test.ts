import { describe, expect, it } from 'vitest';
import {
  AppError,
  contract,
  ErrorCode,
  eventsSubject,
  httpStatusOf,
  liveSubject,
  ownerSubject,
  recordingObject,
  OptionalServiceNames,
  ServiceNames,
  Subjects,
  voiceInSubject,
  voiceOutSubject,
} from './index.js';

describe('contracts', () => {
  it('ties every subject to a request and a response schema, and every subject to a known service', () => {
    for (const subject of Object.values(Subjects)) {
      expect(contract[subject]).toBeDefined();
      expect([...ServiceNames, ...OptionalServiceNames]).toContain(subject.split('.')[0]);
    }
  });

  it('builds no subject from a part that is not one token: a dot, a wildcard, a space, nothing', () => {
    const builders: ((part: string) => string)[] = [
      (p) => voiceInSubject(p),
      (p) => voiceOutSubject(p),
      (p) => liveSubject(p),
      (p) => ownerSubject(p, 'attach'),
      (p) => eventsSubject(p, 'session-1'),
      (p) => eventsSubject('agent-1', p),
      (p) => recordingObject(p, 'session-1'),
      (p) => recordingObject('agent-1', p),
    ];
    for (const build of builders) {
      expect(build('4f1c2a9e-0d7b-4c47-9a61-3f0e2b8c9d10')).toContain('4f1c2a9e-0d7b-4c47-9a61-3f0e2b8c9d10');
      for (const bad of ['*', '>', 'a.b', 'a b', '', 'x'.repeat(201), 'a\nb', '%3E', 'é']) {
        let thrown: unknown;
        try {
          build(bad);
        } catch (err) {
          thrown = err;
        }
        expect(thrown, JSON.stringify(bad)).toBeInstanceOf(AppError);
        expect((thrown as AppError).code).toBe('VALIDATION_FAILED');
      }
    }
  });

  it('maps every error code to a 4xx/5xx status', () => {
    for (const code of ErrorCode.options) {
      expect(httpStatusOf[code]).toBeGreaterThanOrEqual(400);
      expect(httpStatusOf[code]).toBeLessThan(600);
    }
  });

  it('keeps unknown node params and node types of a draft flow', () => {
    const flow = { nodes: [{ id: 'x', nodeType: 'future_thing', weird: { deep: [1, 2] } }], edges: [] };
    expect(contract['agents.create'].request.parse({ name: 'n', flow }).flow).toEqual(flow);
  });
});
