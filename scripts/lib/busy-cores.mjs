import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * How many cores were busy over `ms` (/proc/stat: all but idle and iowait, times the cores; 0 where there is
 * none to read): what other work takes from a run about to start.
 */
export async function busyCores(ms = 1000) {
  const sample = () => {
    try {
      const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/);
      const ticks = fields.map(Number);
      return { idle: ticks[3] + ticks[4], total: ticks.reduce((a, b) => a + b, 0) };
    } catch {
      return undefined;
    }
  };
  const before = sample();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = sample();
  if (!before || !after || after.total === before.total) return 0;
  return (1 - (after.idle - before.idle) / (after.total - before.total)) * availableParallelism();
}
