import type { Handler } from '@vab/bus';
import type { NumberStore } from '../numbers/store.js';

export const phoneNumbersDelete =
  (store: NumberStore): Handler<'telephony.numbers.delete'> =>
  async (req, ctx) => {
    await store.delete(req.id);
    ctx.log.info({ phoneNumberId: req.id }, 'phone number disconnected');
    return { ok: true as const };
  };
