import { AppError } from '@vab/contracts';

/**
 * A subject of issue 45 whose handler has not landed yet: it answers SERVICE_UNAVAILABLE (the contracts land
 * first so the other helpers' branches build on them). Replaced handler by handler.
 */
export const notYet = (what: string) => (): Promise<never> =>
  Promise.reject(new AppError('SERVICE_UNAVAILABLE', `${what} is not available yet`));
