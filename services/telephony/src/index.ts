export { decodeMulaw, encodeMulaw, MULAW_RATE, MULAW_SILENCE } from './audio/mulaw.js';
export { twilioSignature, validTwilioSignature, SIGNATURE_HEADER } from './twilio/signature.js';
export { connectStreamTwiml, sayHangupTwiml, dialTwiml, escapeXml } from './twilio/twiml.js';
