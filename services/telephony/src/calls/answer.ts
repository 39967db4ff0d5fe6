import type { BusClient, Logger } from '@vab/bus';
import { AppError, Subjects } from '@vab/contracts';
import type { NumberStore } from '../numbers/store.js';
import { connectStreamTwiml, sayHangupTwiml } from '../twilio/twiml.js';
import type { CallTokens } from './call-tokens.js';
import type { PhoneCalls } from './phone-calls.js';

/** What a caller hears when a call is refused (docs/operations.md › Telephony): a few words, then the line hangs up. */
export const REFUSALS = {
  unknownNumber: 'The number you have called is not in service. Goodbye.',
  notLive: 'This line is not taking calls right now. Please try again later. Goodbye.',
  busy: 'All our lines are busy. Please call again in a few minutes. Goodbye.',
  failed: 'We cannot take your call right now. Please try again later. Goodbye.',
} as const;
export type Refusal = keyof typeof REFUSALS;

/**
 * The phone line's audio as the voice protocol carries it: 16-bit PCM at μ-law's own rate, in 40 ms frames (two
 * of Twilio's 20 ms chunks a bus message). The playground hands LiveKit the caller's audio in 40 ms frames
 * whatever the frames it gets (`INPUT_FRAME_MS`), so a 40 ms message reaches the VAD when two 20 ms ones would
 * have, at half the messages: each is a socket write here, a message routed by NATS and one read there
 * (docs/performance.md › Phone calls, CPU per call-second).
 */
export const PHONE_AUDIO = { sampleRate: 8000, frameMs: 40 } as const;

/** A voice webhook's parameters that decide its answer (Twilio sends many more). */
export interface IncomingCall {
  callSid: string;
  to: string;
  from: string;
}

export interface AnswerDeps {
  numbers: NumberStore;
  bus: BusClient;
  tokens: CallTokens;
  calls: PhoneCalls;
  log: Logger;
  /** The media socket's URL as the Stream's TwiML names it (and Twilio signs it). */
  streamUrl: string;
  requestId: string;
  /** The caller's keyed hash (its full number's): what keeps it on one side of a canary. */
  callerKeyOf?: (number: string) => string | undefined;
}

/** Bound on starting the call (Twilio waits 15 s for TwiML; the start's own bound is 30 s). */
const START_TIMEOUT_MS = 10_000;

/** The caller's number as a record keeps it: its last 4 digits. */
export const maskNumber = (number: string) => `…${number.slice(-4)}`;

/**
 * A voice webhook's TwiML: the number's agent's live deploy takes the call (`playground.calls.start` with
 * `channel: 'phone'`: admitted against the deploy's caps, hosted at 8 kHz, recorded as a call), its media socket
 * opened with a single-use call token; or the caller hears why not and the line hangs up. A refusal at a cap is
 * recorded by the admission as a `busy` call. Never an HTTP error: Twilio would play its own "an application
 * error has occurred".
 */
export async function answerCall(
  call: IncomingCall,
  deps: AnswerDeps,
): Promise<{ twiml: string; refused?: Refusal; callId?: string }> {
  const refuse = (refused: Refusal) => ({ twiml: sayHangupTwiml(REFUSALS[refused]), refused });
  const number = await deps.numbers.byNumber(call.to);
  if (!number) return refuse('unknownNumber');
  const from = maskNumber(call.from);
  let started: { callId: string; agentId: string };
  try {
    started = await deps.bus.request(
      Subjects.callsStart,
      {
        agentId: number.agentId,
        channel: 'phone',
        caller: { from, to: call.to },
        ...withCallerKey(call.from ? deps.callerKeyOf?.(call.from) : undefined),
        transport: 'bus',
        audio: PHONE_AUDIO,
      },
      { timeoutMs: START_TIMEOUT_MS, requestId: deps.requestId },
    );
  } catch (err) {
    const code = err instanceof AppError ? err.code : undefined;
    if (code === 'CAPACITY_EXHAUSTED' || code === 'RATE_LIMITED') return refuse('busy');
    // nothing live (no deploy, or the agent archived): the admission answers NOT_FOUND
    if (code === 'NOT_FOUND' || code === 'AGENT_ARCHIVED') return refuse('notLive');
    throw err;
  }
  const { callId, agentId } = started;
  await deps.calls.answered(call.callSid, { agentId, callId });
  const token = deps.tokens.mint({ callId, agentId, callSid: call.callSid, to: call.to, from });
  deps.log.info({ callId, agentId, callSid: call.callSid }, 'phone call answered');
  return { twiml: connectStreamTwiml(deps.streamUrl, { token }), callId };
}

/** The refusal words for a failure of ours while answering (logged by the caller). */
export const failedTwiml = () => sayHangupTwiml(REFUSALS.failed);

/** A caller's key where the number names one caller (a withheld number has none: drawn afresh). */
function withCallerKey(callerKey: string | undefined): { callerKey?: string } {
  return callerKey === undefined ? {} : { callerKey };
}
