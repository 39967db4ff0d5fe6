import { lastUserText, offersTool, type ChatReply, type ChatRequest } from '@vab/testkit';

/**
 * The post-call analyst on the OpenAI stub (the agent's own model, as the simulated callers' judges are
 * stubbed): a call whose transcript speaks of an appointment passes "booked", any other fails it; "polite" is
 * never shown (unknown); its summary and extracted fields say the same. Anything else it is asked is the
 * agent's own turn, answered `ok: <what the caller said>`.
 */
export function stubAnalyst(req: ChatRequest): ChatReply {
  const prompt = lastUserText(req);
  // the transcript alone (a criterion's own words would say "appointment" too)
  const booked = /appointment/i.test(prompt.split('\n\nCriterion')[0]!);
  if (offersTool(req, 'summary'))
    return {
      toolCalls: [
        { name: 'summary', args: { summary: booked ? 'The caller booked.' : 'The caller asked.' } },
      ],
    };
  if (offersTool(req, 'call_verdict')) {
    if (prompt.includes('Criterion "polite"'))
      return { toolCalls: [{ name: 'call_verdict', args: { verdict: 'unknown', reason: 'not shown' } }] };
    return {
      toolCalls: [
        {
          name: 'call_verdict',
          args: booked
            ? { verdict: 'passed', reason: 'the caller asked for an appointment' }
            : { verdict: 'failed', reason: 'no appointment was made' },
        },
      ],
    };
  }
  if (offersTool(req, 'extract'))
    return {
      toolCalls: [{ name: 'extract', args: { wants_booking: booked, topic: booked ? 'booking' : 'other' } }],
    };
  return { content: `ok: ${prompt}` };
}
