const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeText = (data: Uint8Array): string => decoder.decode(data);

/**
 * A reply that is already contract-shaped JSON (e.g. stored JSON members joined into an array): the bus
 * sends its text as is instead of parsing and re-serializing it. `T` records what the JSON holds.
 */
export class RawJson<T = unknown> {
  declare readonly _type: T;
  constructor(readonly json: string) {}
}

export const encodeReply = (value: unknown): Uint8Array =>
  value instanceof RawJson ? encoder.encode(value.json) : encodeJson(value);
