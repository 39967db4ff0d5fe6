/** scripts/lib/busy-cores.mjs: how many cores were busy over `ms`. */
export function busyCores(ms?: number): Promise<number>;
