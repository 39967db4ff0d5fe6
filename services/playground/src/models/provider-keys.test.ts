import { describe, expect, it } from 'vitest';
import { KeyRule, parseTrustedUrls } from './provider-keys.js';

const env = { OPENAI_API_KEY: 'server-openai', ELEVEN_API_KEY: '', ELEVENLABS_API_KEY: 'server-eleven' };
const rule = new KeyRule(
  parseTrustedUrls('https://llm-gateway.corp.example/openai/v1, http://10.0.0.5:8000'),
);

describe('where the server key may go', () => {
  it.each([
    [undefined, 'server'],
    ['https://api.openai.com/v1', 'server'],
    ['https://api.openai.com/v1/', 'server'],
    ['https://api.openai.com/v1/../v1', 'server'],
    ['https://api.openai.com/v2', 'none'],
    ['https://api.openai.com.attacker.example/v1', 'none'],
    ['http://api.openai.com/v1', 'none'], // another origin: the scheme differs
    ['https://api.openai.com:8443/v1', 'none'],
    ['https://collector.example/v1', 'none'],
    ['https://llm-gateway.corp.example/openai/v1', 'server'], // trusted by the operator
    ['https://llm-gateway.corp.example/openai/v1/deployments/x', 'server'],
    ['https://llm-gateway.corp.example/openai/v10', 'none'],
    ['https://llm-gateway.corp.example/other', 'none'],
    ['http://10.0.0.5:8000/v1', 'server'],
  ])('an openai model at %s runs with the %s key', (baseURL, expected) => {
    const got = rule.resolve('openai', baseURL, undefined, env);
    expect(got?.source).toBe(expected);
    // elsewhere a model runs keyless: the placeholder, never the server's key
    expect(got?.key).toBe(expected === 'server' ? 'server-openai' : 'no-key');
  });

  it('leaves a model at its provider with no key anywhere without one (MISSING_CREDENTIALS)', () => {
    expect(rule.resolve('openai', undefined, undefined, {})).toBeUndefined();
    expect(rule.resolve('openai', 'https://api.openai.com/v1', {}, {})).toBeUndefined();
    // a trusted URL with no server key set is the flow's own server: keyless
    expect(rule.resolve('openai', 'http://10.0.0.5:8000/v1', undefined, {})?.key).toBe('no-key');
  });

  it("uses a key sent with the request wherever the flow points (it is the caller's own)", () => {
    expect(rule.resolve('openai', 'https://collector.example/v1', { openai: 'mine' }, env)).toEqual({
      key: 'mine',
      source: 'request',
    });
    // null, empty and blank entries fall back to the server's key, where that may go
    for (const v of [null, '', '  '])
      expect(rule.resolve('openai', undefined, { openai: v }, env)?.source).toBe('server');
  });

  it('reads the variables in the table order, skipping empty ones; knows no key of an unknown provider', () => {
    expect(rule.resolve('elevenlabs', undefined, undefined, env)?.key).toBe('server-eleven');
    expect(rule.resolve('acme', undefined, { openai: 'x' }, env)).toBeUndefined();
    expect(rule.resolve('constructor', undefined, {}, env)).toBeUndefined();
  });

  it.each(['not a url', 'ftp://x.example'])('refuses the trusted URL %j', (entry) => {
    expect(() => parseTrustedUrls(entry)).toThrow(entry);
  });
});
