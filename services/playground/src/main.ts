import { configOrExit } from '@vab/service-kit';
import { pino } from 'pino';
import { loadConfig } from './config.js';

const config = configOrExit('playground', () => loadConfig(process.env));

if (config.PLAYGROUND_THREADS === 1) {
  // one instance, on this thread (loaded only here: the supervisor's thread never loads LiveKit)
  const [{ runPlaygroundInstance }, { redactingDestination }] = await Promise.all([
    import('./threads/instance.js'),
    import('./sessions/redactor.js'),
  ]);
  // every line of the process, LiveKit's and ours, passes one filter: the exact credentials in play removed
  runPlaygroundInstance(config, { logDestination: redactingDestination(pino.destination(1)) });
} else {
  // PLAYGROUND_THREADS instances, one per worker thread; this thread supervises them (decision 0037)
  const { superviseThreads } = await import('./threads/supervisor.js');
  superviseThreads(config);
}
