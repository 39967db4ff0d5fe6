import type { BusClient, Handler } from '@vab/bus';
import type { NumberStore } from '../numbers/store.js';
import { checkAgent } from './agent-check.js';

export const phoneNumbersUpdate =
  (store: NumberStore, bus: BusClient): Handler<'telephony.numbers.update'> =>
  async (req, ctx) => {
    // NOT_FOUND for the number first: a missing number is the caller's mistake whatever the agent
    await store.get(req.id);
    await checkAgent(bus, req.update.agentId, ctx.requestId);
    const number = await store.update(req.id, req.update.agentId);
    ctx.log.info({ phoneNumberId: number.id, agentId: number.agentId }, 'phone number moved');
    return number;
  };
