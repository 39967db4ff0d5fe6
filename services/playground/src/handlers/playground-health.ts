import type { Handler } from '@vab/bus';

export const playgroundHealth = (): Handler<'playground.health'> => async () => ({
  service: 'playground',
  ok: true,
});
