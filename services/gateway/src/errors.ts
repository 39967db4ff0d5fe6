import { safeError } from '@vab/bus';
import { AppError, statusOfError, type HttpErrorBody } from '@vab/contracts';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/** Fastify's own request errors, by code, as the one error vocabulary of this API. */
const fastifyCodes: Record<string, (req: FastifyRequest) => AppError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: (req) => tooLarge(req),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: () =>
    new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json'),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => new AppError('INVALID_JSON', 'the request body is empty'),
  FST_ERR_CTP_INVALID_JSON_BODY: () => new AppError('INVALID_JSON', 'the request body is not valid JSON'),
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: () =>
    new AppError('VALIDATION_FAILED', 'content-length does not match the body'),
  FST_ERR_MAX_PARAM_LENGTH: () => new AppError('VALIDATION_FAILED', 'a path parameter is too long'),
  FST_ERR_BAD_URL: () => new AppError('VALIDATION_FAILED', 'the path is not a valid URL'),
};

/** A route schema refused the request: the same `{ code, issues }` the services answer. */
function validationError(fe: FastifyError): AppError {
  const where = fe.validationContext ?? 'body';
  return new AppError('VALIDATION_FAILED', `invalid ${where}`, {
    issues: (fe.validation ?? []).map((v) => ({
      path: [where, ...v.instancePath.split('/').filter(Boolean)].join('.'),
      message: v.message ?? 'invalid',
    })),
  });
}

/** A 413 that says the limit, so a client knows how far to shrink. */
function tooLarge(req: FastifyRequest): AppError {
  const limit = req.routeOptions.bodyLimit;
  return new AppError(
    'PAYLOAD_TOO_LARGE',
    limit ? `request body is too large: the limit is ${limit} bytes` : 'request body is too large',
  );
}

function toAppError(err: unknown, req: FastifyRequest): AppError {
  if (err instanceof AppError) return err;
  const fe = err as Partial<FastifyError> | undefined;
  if (fe?.validation) return validationError(fe as FastifyError);
  const byCode = fe?.code ? fastifyCodes[fe.code] : undefined;
  if (byCode) return byCode(req);
  // Fastify's JSON parser answers with its own codes (above), prototype poisoning included; a SyntaxError
  // is a JSON.parse of our own: classes and codes, never the message's words
  if (err instanceof SyntaxError) return new AppError('INVALID_JSON', 'the request body is not valid JSON');
  if (fe?.statusCode === 413) return tooLarge(req);
  if (fe?.statusCode === 415)
    return new AppError('UNSUPPORTED_MEDIA_TYPE', 'send the body as application/json');
  if (fe?.statusCode !== undefined && fe.statusCode >= 400 && fe.statusCode < 500) {
    return new AppError('VALIDATION_FAILED', 'the request is malformed');
  }
  return new AppError('INTERNAL', 'internal error');
}

/** The one error handler: every error a client sees has this shape, and a status from `statusOfError`. */
export function errorHandler(err: unknown, req: FastifyRequest, reply: FastifyReply): FastifyReply {
  const appErr = toAppError(err, req);
  const status = statusOfError(appErr);
  if (status >= 500) {
    // Unknown errors are logged with their stack here and never described to the client.
    req.log.error({ err: safeError(err), code: appErr.code }, 'request failed');
  } else {
    req.log.info({ code: appErr.code }, 'request rejected');
  }
  const body: HttpErrorBody = { ...appErr.toBody(), requestId: String(req.id) };
  // also here: router-level failures never reach the onRequest hook that sets it
  reply.header('x-request-id', String(req.id));
  if (appErr.retryAfterSeconds !== undefined) reply.header('retry-after', String(appErr.retryAfterSeconds));
  else if (appErr.code === 'SERVICE_UNAVAILABLE' || appErr.code === 'CAPACITY_EXHAUSTED')
    reply.header('retry-after', '1');
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}
