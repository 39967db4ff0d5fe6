/**
 * TwiML, the XML Twilio reads as a call's instructions. Every text and attribute value is escaped: a number, a
 * URL or a parameter reaches it from a request and must not become markup.
 */

const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/** Characters XML 1.0 does not allow at all (C0 controls but tab, line feed, carriage return). */
// eslint-disable-next-line no-control-regex
const NOT_XML = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g;

export const escapeXml = (text: string) =>
  text.replace(NOT_XML, '').replace(/[&<>"']/g, (c) => XML_ESCAPES[c]!);

const HEAD = '<?xml version="1.0" encoding="UTF-8"?>';

/** `<Response><Connect><Stream url>` with its parameters: the call's audio goes to our media WebSocket. */
export function connectStreamTwiml(streamUrl: string, parameters: Record<string, string>): string {
  const params = Object.entries(parameters)
    .map(([name, value]) => `<Parameter name="${escapeXml(name)}" value="${escapeXml(value)}"/>`)
    .join('');
  return `${HEAD}<Response><Connect><Stream url="${escapeXml(streamUrl)}">${params}</Stream></Connect></Response>`;
}

/** A refusal: a few words said, then the call hung up (never an HTTP error, which Twilio answers with its own). */
export function sayHangupTwiml(words: string): string {
  return `${HEAD}<Response><Say>${escapeXml(words)}</Say><Hangup/></Response>`;
}

/** The caller handed over to a phone number (a transfer): Twilio dials it and the agent's stream ends. */
export function dialTwiml(number: string, words?: string): string {
  const say = words ? `<Say>${escapeXml(words)}</Say>` : '';
  return `${HEAD}<Response>${say}<Dial>${escapeXml(number)}</Dial></Response>`;
}

/** An empty answer (a status callback needs none). */
export const EMPTY_TWIML = `${HEAD}<Response/>`;
