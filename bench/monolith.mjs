#!/usr/bin/env node
// The monolith baseline of bench/run.mjs: the agents service's own handler code, mounted directly in one
// Fastify process on the same Redis (no gateway, no NATS). Same validation of the request, same store.
// EDGE=1: behind the gateway's own HTTP edge (request ids, access log, security headers, CORS, rate limit,
// error shape; `createEdge`), so that it differs from the gateway path by the bus alone.
import { agentsHandlers, AgentStore } from '@vab/agents';
import { RawJson } from '@vab/bus';
import { createAccessLog, createLogger } from '@vab/service-kit';
import { AppError, contract, httpStatusOf } from '@vab/contracts';
import { createEdge, loadConfig, securityOf } from '@vab/gateway';
import { createRedis } from '@vab/storage';
import Fastify from 'fastify';

const log = createLogger('monolith', 'info');
const redis = createRedis(process.env.REDIS_URL, log, { name: 'monolith' });
// no bus here: a version diff's latency (asked of the sessions service) is not measured by this baseline
const noBus = { request: () => Promise.reject(new Error('no bus in the monolith')) };
const handlers = agentsHandlers(new AgentStore(redis), redis, noBus, log);
const edge = process.env.EDGE === '1';
const app = edge
  ? await createEdge({
      log,
      accessLog: createAccessLog('monolith', 'info'),
      bodyLimitBytes: 1 << 20,
      security: securityOf(loadConfig(process.env)),
    })
  : Fastify();

async function call(subject, request, reply) {
  const parsed = contract[subject].request.safeParse(request);
  if (!parsed.success) return reply.code(400).send({ code: 'VALIDATION_FAILED' });
  try {
    const result = await handlers[subject](parsed.data, {
      requestId: String(reply.request.id),
      log,
      setHeader: (k, v) => reply.header(k, v),
    });
    // as the gateway does: reply JSON the handler built as a string is sent as it is
    return result instanceof RawJson
      ? reply.type('application/json; charset=utf-8').send(result.json)
      : result;
  } catch (err) {
    // the edge's error handler answers AppErrors in the API's shape; bare, this is its short form
    if (!edge && err instanceof AppError) return reply.code(httpStatusOf[err.code]).send(err.toBody());
    throw err;
  }
}

app.get('/api/agents/:id', (req, reply) => call('agents.get', { id: req.params.id }, reply));
app.get('/api/agents', (req, reply) => call('agents.list', {}, reply));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
console.log('monolith listening');
process.on(
  'SIGTERM',
  () =>
    void app
      .close()
      .then(() => redis.quit())
      .then(() => process.exit(0)),
);
