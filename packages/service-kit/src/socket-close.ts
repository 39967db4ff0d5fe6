/** What `closeSocket` needs of a WebSocket (the `ws` library's); service-kit does not depend on `ws` itself. */
export interface ClosableSocket {
  readonly readyState: number;
  readonly OPEN: number;
  readonly CONNECTING: number;
  close(code?: number, reason?: string): void;
}

/** A close reason fits in a control frame (RFC 6455: 123 bytes); a longer one would make `ws` throw. */
const MAX_REASON_BYTES = 120;

/** `text` cut to what a close frame carries (a character cut in two becomes U+FFFD, still within the bound). */
export const closeReason = (text: string): string =>
  Buffer.from(text).subarray(0, MAX_REASON_BYTES).toString();

/**
 * Closes a socket that is open or still opening with `code` and `reason` cut to fit; one already closing is
 * left alone (its close frame is on its way). Returns the reason as sent, for the caller's own record.
 */
export function closeSocket(socket: ClosableSocket, code: number, reason: string): string {
  const told = closeReason(reason);
  if (socket.readyState === socket.OPEN || socket.readyState === socket.CONNECTING) socket.close(code, told);
  return told;
}
