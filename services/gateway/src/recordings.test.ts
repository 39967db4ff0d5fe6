import { describe, expect, it } from 'vitest';
import { noneMatch, parseRange } from './recordings.js';

describe('a recording request', () => {
  it('reads one bytes range as RFC 9110 says, the whole file for what it may ignore', () => {
    expect(parseRange(undefined, 100)).toBeNull();
    expect(parseRange('bytes=0-9', 100)).toEqual({ start: 0, end: 9 });
    expect(parseRange(' bytes=90- ', 100)).toEqual({ start: 90, end: 99 });
    expect(parseRange('bytes=50-500', 100)).toEqual({ start: 50, end: 99 });
    expect(parseRange('bytes=-10', 100)).toEqual({ start: 90, end: 99 });
    // a suffix longer than the file is the whole file (§14.1.2), not unsatisfiable
    expect(parseRange('bytes=-500', 100)).toEqual({ start: 0, end: 99 });
    expect(parseRange('bytes=100-', 100)).toBe('unsatisfiable');
    expect(parseRange('bytes=-0', 100)).toBe('unsatisfiable');
    expect(parseRange('bytes=-5', 0)).toBe('unsatisfiable');
    for (const ignored of ['bytes=0-1,5-9', 'items=0-5', 'bytes=abc', 'bytes=-', 'bytes=9-2']) {
      expect(parseRange(ignored, 100), ignored).toBeNull();
    }
  });

  it('compares If-None-Match weakly: W/"x" is "x"', () => {
    const etag = '"SHA-256=abc"';
    expect(noneMatch(undefined, etag)).toBe(false);
    expect(noneMatch(etag, etag)).toBe(true);
    expect(noneMatch('W/"SHA-256=abc"', etag)).toBe(true);
    expect(noneMatch('"other", W/"SHA-256=abc"', etag)).toBe(true);
    expect(noneMatch('*', etag)).toBe(true);
    expect(noneMatch('W/"SHA-256=abd"', etag)).toBe(false);
    expect(noneMatch('SHA-256=abc', etag)).toBe(false);
  });
});
