import type { BusClient, Handler } from '@vab/bus';
import type { NumberStore } from '../numbers/store.js';
import { checkAgent } from './agent-check.js';

export const phoneNumbersCreate =
  (store: NumberStore, bus: BusClient): Handler<'telephony.numbers.create'> =>
  async (req, ctx) => {
    await checkAgent(bus, req.agentId, ctx.requestId);
    const number = await store.create(req);
    ctx.log.info({ phoneNumberId: number.id, agentId: number.agentId }, 'phone number connected');
    return number;
  };
