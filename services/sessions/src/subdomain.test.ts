import { describe, expect, it } from 'vitest';
import { subdomainBase } from './subdomain.js';

describe('subdomainBase', () => {
  it.each([
    ['Sales Bot', 'sales-bot'],
    ['  Café  Concierge!! ', 'cafe-concierge'],
    ['Ünïcödé ✨ agent', 'unicode-agent'],
    ['---', 'agent'],
    ['日本語', 'agent'],
    ['www', 'www-agent'],
    ['a'.repeat(80), 'a'.repeat(50)],
    [`${'a'.repeat(49)} b`, 'a'.repeat(49)],
  ])('%j → %j', (name, expected) => {
    const out = subdomainBase(name);
    expect(out).toBe(expected);
    expect(out).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
    expect(out.length).toBeLessThanOrEqual(50);
  });
});
