import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import { jsonEqual } from './diff.js';

const nested = (depth: number, leaf: unknown) => {
  let v: unknown = leaf;
  for (let i = 0; i < depth; i++) v = i % 2 ? { a: v } : [v];
  return v;
};

describe('jsonEqual', () => {
  it('compares JSON values as isDeepStrictEqual does (key order aside)', () => {
    const cases: [unknown, unknown][] = [
      [1, 1],
      [1, '1'],
      [null, {}],
      [[], {}],
      [
        { a: 1, b: [1, { c: null }] },
        { b: [1, { c: null }], a: 1 },
      ],
      [{ a: 1 }, { a: 1, b: undefined }],
      [
        [1, 2],
        [2, 1],
      ],
      [{ a: { b: 1 } }, { a: { b: 2 } }],
    ];
    for (const [a, b] of cases) expect(jsonEqual(a, b)).toBe(isDeepStrictEqual(a, b));
  });

  it('walks any depth a stored flow may have, where a recursive comparison overflows the stack', () => {
    const depth = 200_000;
    expect(() => isDeepStrictEqual(nested(depth, 1), nested(depth, 1))).toThrow(RangeError);
    expect(jsonEqual(nested(depth, 1), nested(depth, 1))).toBe(true);
    expect(jsonEqual(nested(depth, 1), nested(depth, 2))).toBe(false);
  });
});
