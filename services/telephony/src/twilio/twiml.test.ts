import { describe, expect, it } from 'vitest';
import { connectStreamTwiml, dialTwiml, escapeXml, sayHangupTwiml } from './twiml.js';

describe('TwiML', () => {
  it('connects a stream with its parameters, every value escaped', () => {
    const xml = connectStreamTwiml('wss://example.com/telephony/twilio/media', {
      token: 'a&b"<c>',
    });
    expect(xml).toBe(
      '<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="wss://example.com/telephony/twilio/media">' +
        '<Parameter name="token" value="a&amp;b&quot;&lt;c&gt;"/></Stream></Connect></Response>',
    );
  });

  it('says a refusal and hangs up; no markup gets through the words', () => {
    expect(sayHangupTwiml('Sorry </Say><Dial>+15550100</Dial>')).toBe(
      '<?xml version="1.0" encoding="UTF-8"?><Response><Say>Sorry &lt;/Say&gt;&lt;Dial&gt;+15550100&lt;/Dial&gt;</Say><Hangup/></Response>',
    );
  });

  it('dials a number', () => {
    expect(dialTwiml('+15550100', 'Transferring you.')).toContain(
      '<Say>Transferring you.</Say><Dial>+15550100</Dial>',
    );
  });

  it('drops what XML cannot carry', () => {
    expect(escapeXml("it's\u0000 \u0007ok")).toBe('it&apos;s ok');
  });
});
