/**
 * Who hears how long each bus request took, on both sides: the process's metrics (the service kit sets it
 * once at start). One per process, like the metrics registry it feeds; the bus itself depends on no metrics
 * library. `subject` is the subject as sent (a per-session one carries its key: the observer bounds it);
 * `outcome` is `ok` or the error code the reply carried.
 */
export interface BusObserver {
  client(subject: string, outcome: string, seconds: number): void;
  server(subject: string, outcome: string, seconds: number): void;
}

const none: BusObserver = { client: () => undefined, server: () => undefined };
let current: BusObserver = none;

export function observeBus(observer: BusObserver | undefined): void {
  current = observer ?? none;
}

export const busObserver = (): BusObserver => current;
