import type { Handler } from '@vab/bus';
import type { NumberStore } from '../numbers/store.js';

export const phoneNumbersList =
  (store: NumberStore): Handler<'telephony.numbers.list'> =>
  () =>
    store.list();
