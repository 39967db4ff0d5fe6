import { AppError } from '@vab/contracts';
import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';

/**
 * How deep a request body's JSON may nest (objects and arrays). Far above any body of this API (a flow with
 * its nodes' settings is under 15 levels), far below what overflows a stack: everything past the edge
 * (validation, the bus's serializer, the services' walks over a stored flow) may then recurse safely.
 */
export const MAX_JSON_DEPTH = 64;

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The charset a Content-Type declares, lower-cased, or undefined. */
function charsetOf(contentType: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '');
  return m?.[1]?.toLowerCase();
}

/**
 * The body's text, when it is UTF-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8): another
 * declared charset answers 415, bytes that are not UTF-8 answer 400; neither is guessed at or replaced.
 */
export function bodyText(body: Buffer, contentType: string | undefined): string {
  const charset = charsetOf(contentType);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      `send the body as UTF-8 JSON: charset=${charset.slice(0, 40)} is not accepted`,
    );
  }
  try {
    return fatalUtf8.decode(body);
  } catch {
    throw new AppError('INVALID_JSON', 'the request body is not valid UTF-8');
  }
}

const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

/** One open container while scanning: its kind, and where in it the scan is (a key's text, or an index). */
interface Level {
  array: boolean;
  index: number;
  keyStart: number;
  keyEnd: number;
}

const isNumberStart = (c: number) => c === 0x2d || (c >= 0x30 && c <= 0x39);
const isNumberChar = (c: number) => isNumberStart(c) || c === 0x2e || c === 0x2b || c === 0x65 || c === 0x45;

/** `body.a.b[2]`: the path of the current value, for a message that says where. */
function pathOf(text: string, stack: Level[]): string {
  let path = 'body';
  for (const level of stack) {
    if (level.array) path += `[${level.index}]`;
    else if (level.keyStart >= 0) {
      let key: string;
      try {
        key = JSON.parse(text.slice(level.keyStart, level.keyEnd)) as string;
      } catch {
        key = '?';
      }
      path += /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key.slice(0, 60))}]`;
    }
  }
  return path;
}

/**
 * One pass over JSON text before it is parsed (iterative, so any depth is safe here): refuses nesting deeper
 * than MAX_JSON_DEPTH and numbers outside a double's range (`1e400` would parse to Infinity and be stored as
 * null without a word), each with a 400 naming the limit or the place. Malformed text is left to the
 * parser, which says so.
 */
export function checkJsonShape(text: string): void {
  const stack: Level[] = [];
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === BACKSLASH) i++;
        else if (d === QUOTE) break;
      }
      const top = stack[stack.length - 1];
      if (top && !top.array && top.keyStart < 0) {
        top.keyStart = start;
        top.keyEnd = i + 1;
      }
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (stack.length >= MAX_JSON_DEPTH) {
        throw new AppError(
          'VALIDATION_FAILED',
          `the request body nests deeper than ${MAX_JSON_DEPTH} levels, the limit for JSON bodies`,
          { issues: [{ path: pathOf(text, stack), message: `nested deeper than ${MAX_JSON_DEPTH} levels` }] },
        );
      }
      stack.push({ array: c === OPEN_ARRAY, index: 0, keyStart: -1, keyEnd: -1 });
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop();
    } else if (c === COMMA) {
      const top = stack[stack.length - 1];
      if (top?.array) top.index++;
      else if (top) top.keyStart = -1;
    } else if (c === COLON) {
      continue;
    } else if (isNumberStart(c)) {
      const start = i;
      let exponent = false;
      for (; i + 1 < n && isNumberChar(text.charCodeAt(i + 1)); i++) {
        const d = text.charCodeAt(i + 1);
        if (d === 0x65 || d === 0x45) exponent = true;
      }
      // only an exponent or more than 308 digits overflows a double: short plain numbers are not parsed here
      if (!exponent && i - start < 300) continue;
      const value = Number(text.slice(start, i + 1));
      if (value === Infinity || value === -Infinity) {
        const where = pathOf(text, stack);
        throw new AppError(
          'VALIDATION_FAILED',
          `${where} is a number too large for a double (${text.slice(start, Math.min(i + 1, start + 40))})`,
          { issues: [{ path: where, message: 'number out of range' }] },
        );
      }
    }
  }
}

/**
 * Bodies are JSON only (spec): without this Fastify would accept text/plain as a string. A text/plain POST needs
 * no CORS preflight, so accepting it would open the API to cross-site requests from any page.
 */
export function registerJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser('text/plain');
  // Fastify's own JSON parser (prototype poisoning refused), except that an empty body is no body: a fetch
  // wrapper that always sets Content-Type must not break the routes that take none.
  // The body must be UTF-8 (another charset 415, invalid bytes 400), nest at most MAX_JSON_DEPTH levels and
  // hold no number a double cannot (above): checked before parsing, so nothing past here overflows.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    let text: string;
    try {
      text = bodyText(body as Buffer, req.headers['content-type']);
      if (text !== '') checkJsonShape(text);
    } catch (err) {
      done(err as Error, undefined);
      return;
    }
    if (text === '') done(null, undefined);
    else void json(req, text, done);
  });
}

/**
 * How much of a body over the limit is read (and dropped) before its 413 is sent and the connection closed.
 * Closed with the body's rest unread, the kernel answers the client's next bytes with a reset, and a client
 * that sends its whole body before reading (curl, fetch) gets EPIPE instead of the answer.
 */
export const OVERSIZED_BODY_DRAIN_BYTES = 16 * 1024 * 1024;

/**
 * A 413 for a body still arriving waits until the body has arrived (up to OVERSIZED_BODY_DRAIN_BYTES, within
 * the receive timeout, which answers 408 past it), so the answer is read, not reset. A declared length past the
 * bound is answered at once: what comes after it may then be reset.
 */
export function drainOversizedBodies(app: FastifyInstance): void {
  app.addHook('onSend', (req, reply, payload, done) => {
    if (reply.statusCode !== 413 || req.raw.complete) {
      done(null, payload);
      return;
    }
    void drained(req.raw, OVERSIZED_BODY_DRAIN_BYTES).then((whole) => {
      // the rest is not read: the connection ends with the answer
      if (!whole) void reply.header('connection', 'close');
      done(null, payload);
    });
  });
}

/**
 * Reads a request's body to its end, dropping it: true once it ended, false past `maxBytes` (or a declared
 * length past it) or when the connection failed.
 */
function drained(raw: IncomingMessage, maxBytes: number): Promise<boolean> {
  return new Promise((resolve) => {
    if (Number(raw.headers['content-length']) > maxBytes) {
      resolve(false);
      return;
    }
    let read = 0;
    const stop = (whole: boolean) => {
      raw.off('data', onData).off('end', ended).off('close', failed).off('error', failed);
      resolve(whole);
    };
    const ended = () => stop(true);
    const failed = () => stop(false);
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > maxBytes) stop(false);
    };
    raw.on('data', onData).on('end', ended).on('close', failed).on('error', failed);
    raw.resume();
  });
}
