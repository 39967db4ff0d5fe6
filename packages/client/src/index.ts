import createClient, {
  type Client,
  type ClientPathsWithMethod,
  type FetchResponse,
  type MaybeOptionalInit,
} from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths } from './schema.js';

/** Every resource and body of the API, by the names the API document gives them. */
export type Schemas = components['schemas'];
/** The one shape of every error the API answers. */
export type ErrorBody = Schemas['Error'];
export type ErrorCode = ErrorBody['code'];

/** Whether an answer's body is this API's error shape (a proxy's HTML 502 is not). */
export function isErrorBody(body: unknown): body is ErrorBody {
  const b = body as Partial<ErrorBody> | null;
  return typeof b === 'object' && b !== null && typeof b.code === 'string' && typeof b.message === 'string';
}

/**
 * An answer other than success: its status, and the API's error body (code, message, requestId, …) when
 * the answer carries one. Something between the client and the API (a proxy, a load balancer) may answer
 * instead: then `code` and `body` are undefined, and `requestId` is the header's, if any.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly code: ErrorCode | undefined;
  readonly requestId: string | undefined;
  readonly body: ErrorBody | undefined;

  constructor(
    readonly status: number,
    body: unknown,
    response?: Response,
  ) {
    const ours = isErrorBody(body) ? body : undefined;
    super(
      ours
        ? `${status} ${ours.code}: ${ours.message}`
        : `${status}: the answer is not this API's error (${response?.headers.get('content-type') ?? 'no body'})`,
    );
    this.body = ours;
    this.code = ours?.code;
    this.requestId = ours?.requestId ?? response?.headers.get('x-request-id') ?? undefined;
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

type Method = 'get' | 'put' | 'post' | 'patch' | 'delete';
type InitOf<P extends keyof paths, M extends Method> = MaybeOptionalInit<paths[P], M>;

/**
 * One method of the client, for any path that has it. Unlike openapi-fetch's own signature (which infers
 * the init and so lets a misspelt optional body field through), the init is typed from the path, so a
 * body field the API does not have is a compile error, as the API refuses it (400 `unknown field`).
 */
type StrictMethod<M extends Method> = <P extends ClientPathsWithMethod<Client<paths>, M>>(
  url: P,
  ...init: undefined extends InitOf<P, M> ? [init?: InitOf<P, M>] : [init: InitOf<P, M>]
) => Promise<
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the constraint openapi-fetch declares
  FetchResponse<Extract<paths[P][M], Record<string | number, any>>, InitOf<P, M>, `${string}/${string}`>
>;

export type ApiClient = Omit<Client<paths>, 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE'> & {
  GET: StrictMethod<'get'>;
  PUT: StrictMethod<'put'>;
  POST: StrictMethod<'post'>;
  PATCH: StrictMethod<'patch'>;
  DELETE: StrictMethod<'delete'>;
};

/**
 * The typed client: `client.GET('/api/agents/{id}', { params: { path: { id } } })` and so on, each path,
 * parameter, header (`if-match`, `idempotency-key`), body and answer typed from the API document. Each
 * call resolves to `{ data, error, response }`; `ok()` turns that into the data or an `ApiError`.
 */
export function createApiClient(opts: ClientOptions): ApiClient {
  // the same object: only its methods' types are stricter
  return createClient<paths>({
    baseUrl: opts.baseUrl.replace(/\/$/, ''),
    ...(opts.fetch ? { fetch: opts.fetch } : {}),
    headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
  }) as unknown as ApiClient;
}

/** The data of a successful call; an `ApiError` for any other answer. */
export async function ok<D>(call: Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D> {
  const { data, error, response } = await call;
  if (response.ok) return data as D;
  throw new ApiError(response.status, error, response);
}

/** The agent's entity tag from an answer, for the next `if-match`. */
export const etagOf = (response: Response): string | undefined => response.headers.get('etag') ?? undefined;

export type Operation = keyof operations;
