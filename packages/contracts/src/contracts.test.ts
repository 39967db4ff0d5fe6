import { describe, expect, it } from 'vitest';
import { contract, ErrorCode, httpStatusOf, ServiceNames, Subjects } from './index.js';

describe('contracts', () => {
  it('ties every subject to a request and a response schema, and every subject to a known service', () => {
    for (const subject of Object.values(Subjects)) {
      expect(contract[subject]).toBeDefined();
      expect(ServiceNames).toContain(subject.split('.')[0]);
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
