import createClient, { type Client } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths } from './schema.js';

/** Every resource and body of the API, by the names the API document gives them. */
export type Schemas = components['schemas'];
/** The one shape of every error the API answers. */
export type ErrorBody = Schemas['Error'];
export type ErrorCode = ErrorBody['code'];

/** An answer other than success: its status, and the API's error body (code, message, requestId, …). */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly code: ErrorCode;
  readonly requestId: string;

  constructor(
    readonly status: number,
    readonly body: ErrorBody,
  ) {
    super(`${status} ${body.code}: ${body.message}`);
    this.code = body.code;
    this.requestId = body.requestId;
  }
}

export interface ClientOptions {
  /** Where the gateway is, e.g. `http://127.0.0.1:3000`. */
  baseUrl: string;
  /** One of the gateway's API tokens (sent as `Authorization: Bearer …`), when it requires them. */
  token?: string | undefined;
  /** Another fetch (a test's, a framework's). */
  fetch?: typeof globalThis.fetch;
}

export type ApiClient = Client<paths>;

/**
 * The typed client: `client.GET('/api/agents/{id}', { params: { path: { id } } })` and so on, each path,
 * parameter, header (`if-match`, `idempotency-key`), body and answer typed from the API document. Each
 * call resolves to `{ data, error, response }`; `ok()` turns that into the data or an `ApiError`.
 */
export function createApiClient(opts: ClientOptions): ApiClient {
  return createClient<paths>({
    baseUrl: opts.baseUrl.replace(/\/$/, ''),
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
    headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
  });
}

/** The data of a successful call; an `ApiError` for any other answer. */
export async function ok<D>(call: Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D> {
  const { data, error, response } = await call;
  if (response.ok) return data as D;
  throw new ApiError(response.status, error as ErrorBody);
}

/** The agent's entity tag from an answer, for the next `if-match`. */
export const etagOf = (response: Response): string | undefined => response.headers.get('etag') ?? undefined;

export type Operation = keyof operations;
