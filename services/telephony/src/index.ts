export { decodeMulaw, encodeMulaw, MULAW_RATE, MULAW_SILENCE } from './audio/mulaw.js';
export { twilioSignature, validTwilioSignature, SIGNATURE_HEADER } from './twilio/signature.js';
export { connectStreamTwiml, sayHangupTwiml, dialTwiml, escapeXml } from './twilio/twiml.js';
export { REFUSALS } from './calls/answer.js';
export { CALL_TOKENS_BUCKET } from './calls/call-tokens.js';
export { VOICE_PATH, STATUS_PATH, MEDIA_PATH } from './http/server.js';
export { loadConfig } from './config.js';
export { startTelephonyService, telephonyHandlers } from './service.js';
export type { TelephonyService, TelephonySettings } from './service.js';
