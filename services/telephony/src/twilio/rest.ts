import { safeError, type Logger } from '@vab/bus';
import type { PhoneTransferAnswer } from '@vab/contracts';
import { EgressRefused, type EgressFetch } from '@vab/egress';
import { dialTwiml } from './twiml.js';

/** What a transfer's number must be (E.164), checked again at this edge: the flow's text is untrusted. */
const E164 = /^\+[1-9][0-9]{6,14}$/;
/** Call SIDs as Twilio writes them: CA and 32 hex digits (what goes into the REST path). */
const CALL_SID = /^CA[0-9a-fA-F]{32}$/;

export interface TwilioRestSettings {
  /** The account the REST call acts for; unset: no transfer to a number can be made (`unavailable`). */
  accountSid: string | undefined;
  authToken: string;
  /** `https://api.twilio.com`, or a stub's base URL in a test. */
  apiBaseUrl: string;
}

/**
 * Twilio's REST API as the telephony service uses it: one call update, the transfer of a live call to a phone
 * number (`<Dial>` as the call's new TwiML: Twilio ends the Media Stream and dials). Through the egress policy
 * like every outbound connection; its answer is read only for its status.
 */
export class TwilioRest {
  constructor(
    private readonly settings: TwilioRestSettings,
    private readonly fetch: EgressFetch,
    private readonly log: Logger,
  ) {}

  async dial(callSid: string, targetNumber: string): Promise<PhoneTransferAnswer> {
    const { accountSid, authToken, apiBaseUrl } = this.settings;
    if (accountSid === undefined) return { ok: false, reason: 'unavailable' };
    if (!E164.test(targetNumber) || !CALL_SID.test(callSid)) return { ok: false, reason: 'error' };
    const url = `${apiBaseUrl}/2010-04-01/Accounts/${accountSid}/Calls/${callSid}.json`;
    try {
      const res = await this.fetch(url, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
        body: new URLSearchParams({ Twiml: dialTwiml(targetNumber) }).toString(),
        // Twilio's API answers at once or not at all: a call on hold is not kept waiting on it, nor sent elsewhere
        redirect: 'manual',
        signal: AbortSignal.timeout(REST_TIMEOUT_MS),
      });
      // drained: the connection goes back to the pool (nothing of it is needed but the status)
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) return { ok: true };
      this.log.warn(
        { code: 'TRANSFER_FAILED', callSid, status: res.status },
        'twilio refused the call update',
      );
      return { ok: false, reason: 'error' };
    } catch (err) {
      // a refusal by the egress policy is logged by the client itself (TELEPHONY_EGRESS_REFUSED)
      if (!refusedByPolicy(err))
        this.log.warn({ code: 'TRANSFER_FAILED', callSid, err: safeError(err) }, 'twilio call update failed');
      return { ok: false, reason: 'error' };
    }
  }
}

/** Bound on Twilio's answer to a call update. */
const REST_TIMEOUT_MS = 10_000;

/** Whether the egress policy refused the connection (fetch wraps the refusal as its cause). */
function refusedByPolicy(err: unknown): boolean {
  for (let e = err, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++)
    if (e instanceof EgressRefused) return true;
  return false;
}
