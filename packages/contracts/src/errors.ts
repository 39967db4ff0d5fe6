import { z } from 'zod';

/** Every error that crosses the bus or reaches a client carries one of these codes. */
export const ErrorCode = z.enum([
  'VALIDATION_FAILED',
  'INVALID_JSON',
  'NOT_FOUND',
  'ROUTE_NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'AGENT_ARCHIVED',
  'CONFLICT',
  'ILLEGAL_TRANSITION',
  'TESTS_NOT_PASSED',
  'PRECONDITION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'LIMIT_EXCEEDED',
  'UNSUPPORTED_MEDIA_TYPE',
  'RANGE_NOT_SATISFIABLE',
  'FLOW_INVALID',
  'MISSING_CREDENTIALS',
  'UNAUTHORIZED',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'CAPACITY_EXHAUSTED',
  'UPSTREAM_FAILED',
  'TIMEOUT',
  'REQUEST_TIMEOUT',
  'HEADERS_TOO_LARGE',
  'INTERNAL',
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/**
 * The one code→HTTP status table. `satisfies Record<ErrorCode, …>` makes it exhaustive: adding a code
 * without a status fails the build. The bus also uses it for the NATS micro `Nats-Service-Error-Code` header.
 */
export const httpStatusOf = {
  VALIDATION_FAILED: 400,
  INVALID_JSON: 400,
  NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  AGENT_ARCHIVED: 409,
  CONFLICT: 409,
  ILLEGAL_TRANSITION: 409,
  TESTS_NOT_PASSED: 409,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  LIMIT_EXCEEDED: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RANGE_NOT_SATISFIABLE: 416,
  FLOW_INVALID: 422,
  MISSING_CREDENTIALS: 400,
  UNAUTHORIZED: 401,
  RATE_LIMITED: 429,
  SERVICE_UNAVAILABLE: 503,
  // this server has no room (every playground instance full, overloaded or draining); a live deploy's own
  // call caps are the same code at 429 (`capacity: 'deploy'`, statusOfError)
  CAPACITY_EXHAUSTED: 503,
  UPSTREAM_FAILED: 502,
  TIMEOUT: 504,
  REQUEST_TIMEOUT: 408,
  HEADERS_TOO_LARGE: 431,
  INTERNAL: 500,
} as const satisfies Record<ErrorCode, number>;

/**
 * The HTTP status of an error: its code's (`httpStatusOf`), except a live deploy's own caps, 429 where the
 * server's capacity is 503 (issue 45 asks 429 for those, issue 50 503 for a server with no room: one code,
 * since a client does the same thing on both, retry after `Retry-After`).
 */
export function statusOfError(body: Pick<ErrorBody, 'code' | 'capacity'>): number {
  return body.code === 'CAPACITY_EXHAUSTED' && body.capacity === 'deploy' ? 429 : httpStatusOf[body.code];
}

export const FieldIssue = z.object({
  path: z.string().describe('Dotted path of the offending field, e.g. `body.flow.nodes.0.id`'),
  message: z.string(),
});
export type FieldIssue = z.infer<typeof FieldIssue>;

/** What a failed bus request carries, and (plus `requestId`) what a client receives. */
export const ErrorBody = z.object({
  code: ErrorCode,
  message: z.string(),
  issues: z.array(FieldIssue).optional(),
  /** Flow compiler findings, on FLOW_INVALID. */
  details: z.unknown().optional(),
  /**
   * On RATE_LIMITED and CAPACITY_EXHAUSTED: when asking again may succeed (s). The gateway sends it as the
   * `Retry-After` header (a daily call cap: the seconds to the next UTC day).
   */
  retryAfterSeconds: z.number().int().nonnegative().max(86_400).optional(),
  /**
   * On CAPACITY_EXHAUSTED: whose capacity is spent. `server`: every playground instance is full, overloaded
   * or draining (503). `deploy`: a live deploy's own caps, set by its builder (`maxConcurrentCalls`,
   * `dailyCallCap`; 429).
   */
  capacity: z.enum(['server', 'deploy']).optional(),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

export const HttpErrorBody = ErrorBody.extend({ requestId: z.string() });
export type HttpErrorBody = z.infer<typeof HttpErrorBody>;

/**
 * Thrown by handlers for expected failures; crosses the bus as `{code, message}`. `cause`: the error this one
 * stands for (a Redis failure, a model's refusal), for the logs; it never crosses the bus.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly issues: FieldIssue[] | undefined;
  readonly details: unknown;
  readonly retryAfterSeconds: number | undefined;
  readonly capacity: ErrorBody['capacity'];

  constructor(
    code: ErrorCode,
    message: string,
    extra: {
      issues?: FieldIssue[];
      details?: unknown;
      cause?: unknown;
      retryAfterSeconds?: number;
      capacity?: ErrorBody['capacity'];
    } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'AppError';
    this.code = code;
    this.issues = extra.issues;
    this.details = extra.details;
    this.retryAfterSeconds = extra.retryAfterSeconds;
    this.capacity = extra.capacity;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message };
    if (this.issues) body.issues = this.issues;
    if (this.details !== undefined) body.details = this.details;
    if (this.retryAfterSeconds !== undefined) body.retryAfterSeconds = this.retryAfterSeconds;
    if (this.capacity !== undefined) body.capacity = this.capacity;
    return body;
  }
}

/** Turns zod issues into the field-level list a client gets, prefixed with where the value came from. */
export function toFieldIssues(error: z.ZodError, prefix = ''): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.'),
    message: issue.message,
  }));
}
