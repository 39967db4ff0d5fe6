import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { ProposeCasesParameters } from './generate.js';

describe('the case generator’s tool', () => {
  it("tells the model the contract's bounds: maxTurns 1–30, names and criteria bounded", () => {
    const schema = z.toJSONSchema(ProposeCasesParameters) as unknown as {
      properties: {
        cases: { items: { properties: Record<string, { properties?: Record<string, object> }> } };
      };
    };
    const item = schema.properties.cases.items.properties;
    expect(item.simulation!.properties!.maxTurns).toMatchObject({ type: 'integer', minimum: 1, maximum: 30 });
    expect(Object.keys(item.simulation!.properties!)).toEqual(['persona', 'goal', 'maxTurns']);
    expect(item.criteria).toMatchObject({ maxItems: 20 });
  });
});
