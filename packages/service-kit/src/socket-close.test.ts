import { describe, expect, it } from 'vitest';
import { closeSocket } from './socket-close.js';

const socketIn = (readyState: number) => {
  const closed: [number | undefined, string | undefined][] = [];
  const socket = {
    readyState,
    OPEN: 1,
    CONNECTING: 0,
    close: (code?: number, reason?: string) => void closed.push([code, reason]),
  };
  return { socket, closed };
};

describe('closeSocket', () => {
  it('closes an open or opening socket with a reason that fits a close frame, and says what it sent', () => {
    for (const state of [0, 1]) {
      const { socket, closed } = socketIn(state);
      const told = closeSocket(socket, 4400, 'é'.repeat(100));
      expect(Buffer.byteLength(told)).toBeLessThanOrEqual(123);
      expect(told.startsWith('é'.repeat(60))).toBe(true);
      expect(closed).toEqual([[4400, told]]);
    }
    expect(closeSocket(socketIn(1).socket, 1000, 'session ended')).toBe('session ended');
  });

  it('leaves a socket that is already closing alone', () => {
    const { socket, closed } = socketIn(2);
    expect(closeSocket(socket, 1011, 'failed')).toBe('failed');
    expect(closed).toEqual([]);
  });
});
