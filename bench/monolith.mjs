#!/usr/bin/env node
// The monolith baseline of bench/run.mjs: the agents service's own handler code, mounted directly in one
// Fastify process on the same Redis (no gateway, no NATS). Same validation of the request, same store.
import { agentsHandlers, AgentStore } from '@vab/agents';
import { createLogger } from '@vab/bus';
import { AppError, contract, httpStatusOf } from '@vab/contracts';
import { createRedis } from '@vab/storage';
import Fastify from 'fastify';

const log = createLogger('monolith', 'info');
const redis = createRedis(process.env.REDIS_URL, log, { name: 'monolith' });
const handlers = agentsHandlers(new AgentStore(redis), redis);
const app = Fastify();

async function call(subject, request, reply) {
  const parsed = contract[subject].request.safeParse(request);
  if (!parsed.success) return reply.code(400).send({ code: 'VALIDATION_FAILED' });
  const headers = {};
  try {
    const result = await handlers[subject](parsed.data, {
      requestId: 'm',
      log,
      setHeader: (k, v) => (headers[k] = v),
    });
    if (headers.ETag) reply.header('etag', headers.ETag);
    return result;
  } catch (err) {
    if (err instanceof AppError) return reply.code(httpStatusOf[err.code]).send(err.toBody());
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
