import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';

describe('the telephony configuration', () => {
  it('needs the Twilio auth token, and names it when it is missing', () => {
    expect(() => loadConfig({})).toThrow(/TWILIO_AUTH_TOKEN/);
  });

  it('takes empty optional values as unset, and refuses a PUBLIC_URL that is not http(s)', () => {
    const c = loadConfig({ TWILIO_AUTH_TOKEN: 't', PUBLIC_URL: '', TWILIO_ACCOUNT_SID: '' });
    expect(c.PUBLIC_URL).toBeUndefined();
    expect(c.TWILIO_ACCOUNT_SID).toBeUndefined();
    expect(c.TELEPHONY_PORT).toBe(8090);
    expect(c.TWILIO_API_BASE_URL).toBe('https://api.twilio.com');
    expect(loadConfig({ TWILIO_AUTH_TOKEN: 't', PUBLIC_URL: 'https://phone.example.com/' }).PUBLIC_URL).toBe(
      'https://phone.example.com',
    );
    expect(() => loadConfig({ TWILIO_AUTH_TOKEN: 't', PUBLIC_URL: 'ftp://x' })).toThrow(/PUBLIC_URL/);
  });

  it('reads the internal hosts the REST calls to Twilio may reach, and names a bad entry', () => {
    expect(loadConfig({ TWILIO_AUTH_TOKEN: 't' }).TWILIO_EGRESS_ALLOW).toEqual([]);
    expect(
      loadConfig({ TWILIO_AUTH_TOKEN: 't', TWILIO_EGRESS_ALLOW: '127.0.0.1' }).TWILIO_EGRESS_ALLOW,
    ).toHaveLength(1);
    expect(() => loadConfig({ TWILIO_AUTH_TOKEN: 't', TWILIO_EGRESS_ALLOW: '10.0.0.0/99' })).toThrow(
      /TWILIO_EGRESS_ALLOW/,
    );
  });
});

const base = { TWILIO_AUTH_TOKEN: 'x' };

describe('TRUST_PROXY', () => {
  it('takes addresses, CIDR ranges and proxy-addr range names; unset trusts no proxy', () => {
    expect(loadConfig(base).TRUST_PROXY).toBeUndefined();
    expect(loadConfig({ ...base, TRUST_PROXY: '' }).TRUST_PROXY).toBeUndefined();
    expect(
      loadConfig({ ...base, TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8,loopback' }).TRUST_PROXY,
    ).toEqual(['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8', 'loopback']);
  });

  it('refuses anything else, naming the variable and the entry', () => {
    for (const bad of ['true', '2', '10.0.0.0/33', 'proxy.example.com', '10.0.0.1/8/1']) {
      expect(() => loadConfig({ ...base, TRUST_PROXY: bad })).toThrow(/TRUST_PROXY/);
    }
    expect(() => loadConfig({ ...base, TRUST_PROXY: '10.0.0.1, nope' })).toThrow(/"nope"/);
  });
});
