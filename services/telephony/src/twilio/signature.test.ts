import { describe, expect, it } from 'vitest';
import { twilioSignature, validTwilioSignature } from './signature.js';

/** Twilio's documented example ("Validating requests"; the helper libraries' validation docs). */
const DOC = {
  token: '12345',
  url: 'https://mycompany.com/myapp.php?foo=1&bar=2',
  params: {
    CallSid: 'CA1234567890ABCDE',
    Caller: '+14158675309',
    Digits: '1234',
    From: '+14158675309',
    To: '+18005551212',
  },
  signature: 'RSOYDt4T1cUTdK1PDd93/VVr8B8=',
};

describe("Twilio's request signature", () => {
  it("matches Twilio's documented example", () => {
    expect(twilioSignature(DOC.token, DOC.url, Object.entries(DOC.params))).toBe(DOC.signature);
    // the parameters' order as sent does not matter: they are sorted by name
    const reversed = Object.entries(DOC.params).reverse();
    expect(validTwilioSignature(DOC.token, DOC.signature, DOC.url, reversed)).toBe(true);
  });

  it('refuses a missing, altered or differently keyed signature', () => {
    const params = Object.entries(DOC.params);
    expect(validTwilioSignature(DOC.token, undefined, DOC.url, params)).toBe(false);
    expect(validTwilioSignature(DOC.token, '', DOC.url, params)).toBe(false);
    expect(validTwilioSignature('54321', DOC.signature, DOC.url, params)).toBe(false);
    expect(
      validTwilioSignature(DOC.token, DOC.signature, 'http://mycompany.com/myapp.php?foo=1&bar=2', params),
    ).toBe(false);
    const tampered = params.map(([k, v]) => [k, k === 'To' ? '+18005551213' : v] as [string, string]);
    expect(validTwilioSignature(DOC.token, DOC.signature, DOC.url, tampered)).toBe(false);
    expect(validTwilioSignature(DOC.token, DOC.signature.slice(1), DOC.url, params)).toBe(false);
  });

  it('signs a URL alone for a GET (the Media Streams upgrade)', () => {
    const sig = twilioSignature(DOC.token, 'wss://example.com/telephony/twilio/media');
    expect(validTwilioSignature(DOC.token, sig, 'wss://example.com/telephony/twilio/media')).toBe(true);
  });
});
