import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header Twilio signs every webhook and Media Streams upgrade with. */
export const SIGNATURE_HEADER = 'x-twilio-signature';

/**
 * Twilio's request signature (twilio.com/docs/usage/security, "Validating requests"): base64 HMAC-SHA1 with the
 * account's auth token over the URL Twilio called (scheme, host, path and query exactly as configured) followed
 * by each POST parameter's name and value, sorted by name, with no separators. A GET (the Media Streams
 * upgrade) signs the URL alone.
 */
export function twilioSignature(
  authToken: string,
  url: string,
  params: Iterable<[string, string]> = [],
): string {
  const sorted = [...params].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const hmac = createHmac('sha1', authToken).update(url, 'utf8');
  for (const [name, value] of sorted) hmac.update(name, 'utf8').update(value, 'utf8');
  return hmac.digest('base64');
}

/** Whether `signature` (the header's value, maybe absent) is Twilio's for this request; constant time. */
export function validTwilioSignature(
  authToken: string,
  signature: string | undefined,
  url: string,
  params: Iterable<[string, string]> = [],
): boolean {
  if (!signature) return false;
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
