import { ErrorCode, OptionalServiceNames } from '@vab/contracts';
import { routes } from '@vab/gateway';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentCheck } from '../../helpers/openapi-check.js';
import { api, sampleFlow, startStack, type Stack } from '../../helpers/stack.js';

let stack: Stack;
let http: ReturnType<typeof api>;
let agentId: string;
let sessionId: string;
let deployId: string;

beforeAll(async () => {
  stack = await startStack();
  http = api(stack.baseUrl);
  agentId = (await http.post('/api/agents', { name: 'Seed', flow: sampleFlow() })).body.id;
  sessionId = (await http.post(`/api/agents/${agentId}/test-sessions`, { sessionType: 'voice' })).body.id;
  deployId = (await http.post(`/api/agents/${agentId}/deploys`, { external: true })).body.id;
});
afterAll(async () => {
  await stack.close();
});

const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 50 }),
  fc.constantFrom(
    '..',
    '../../etc/passwd',
    '%00',
    '__proto__',
    'constructor',
    ' ',
    '😀'.repeat(30),
    'a'.repeat(5000),
  ),
  fc.uuid(),
);
/** Any JSON value, with the keys that try prototype pollution mixed in, and deep nesting. */
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.integer(),
    nasty,
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(
      fc.oneof(
        fc.string(),
        fc.constantFrom('__proto__', 'constructor', 'prototype', 'name', 'flow', 'nodes'),
      ),
      tie('value'),
      {
        maxKeys: 5,
      },
    ),
  ),
})).value;
const deep = fc.integer({ min: 50, max: 3000 }).map((n) => '['.repeat(n) + ']'.repeat(n));
const body = fc.oneof(
  jsonValue.map((v) => ({ raw: JSON.stringify(v) ?? 'null', type: 'application/json' })),
  fc.string().map((s) => ({ raw: s, type: 'application/json' })), // mostly invalid JSON
  deep.map((raw) => ({ raw, type: 'application/json' })),
  fc.constant({ raw: '{"__proto__":{"polluted":true},"name":"x"}', type: 'application/json' }),
  fc.constant({
    raw: '{"constructor":{"prototype":{"polluted":true}},"name":"x"}',
    type: 'application/json',
  }),
  fc
    .tuple(
      fc.string(),
      fc.constantFrom(
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data',
        'application/xml',
      ),
    )
    .map(([raw, type]) => ({ raw, type })),
  fc.constant({ raw: undefined, type: undefined }),
);
const header = fc.stringMatching(/^[ -~]{0,80}$/);
const paramValue = fc.oneof(
  nasty,
  fc.constantFrom('AGENT', 'SESSION', 'DEPLOY', '1', '0', '-1', '99999999999999999999'),
);

const request = fc.record({
  // the test stack runs no optional service (telephony): its routes answer 503 by design there, and
  // tests/integration/voice/telephony.test.ts refuses their bad input against a running one
  route: fc.constantFrom(
    ...routes
      .filter((r) => !OptionalServiceNames.some((svc) => r.subject.startsWith(`${svc}.`)))
      .map((r) => ({ method: r.method, url: r.url })),
  ),
  params: fc.dictionary(fc.constantFrom('id', 'sessionId', 'deployId', 'version'), paramValue),
  body,
  ifMatch: fc.option(header, { nil: undefined }),
  idempotencyKey: fc.option(header, { nil: undefined }),
});

describe('every route under generated input', () => {
  it('never answers 500, always answers errors in one JSON shape with a stable code, and keeps storage whole', async () => {
    const codes = new Set(ErrorCode.options);
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ route, params, body: b, ifMatch, idempotencyKey }) => {
        const value = (name: string) => {
          const v = params[name] ?? 'x';
          return v === 'AGENT' ? agentId : v === 'SESSION' ? sessionId : v === 'DEPLOY' ? deployId : v;
        };
        const path = route.url.replace(/:([A-Za-z]+)/g, (_m, name: string) =>
          encodeURIComponent(value(name)),
        );
        const headers: Record<string, string> = {};
        if (b.type) headers['content-type'] = b.type;
        if (ifMatch !== undefined) headers['if-match'] = ifMatch;
        if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
        // the agent-session routes would reach for a media server: their inputs are checked, nothing more
        const res = await fetch(stack.baseUrl + path, {
          method: route.method,
          headers,
          body: route.method === 'GET' ? undefined : b.raw,
        });
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        // every answer is one the API document describes, status and body
        const problem = (await documentCheck(stack.baseUrl)).problem(
          route.method,
          path,
          res.status,
          text ? JSON.parse(text) : undefined,
        );
        expect(problem, text.slice(0, 300)).toBeUndefined();
        expect(res.status, `${route.method} ${path} → ${text.slice(0, 300)}`).toBeLessThan(500);
        if (res.status >= 400) {
          const parsed = JSON.parse(text) as { code: string; message: string; requestId: string };
          expect(codes.has(parsed.code as ErrorCode), text).toBe(true);
          expect(typeof parsed.message).toBe('string');
          expect(parsed.requestId).toBe(res.headers.get('x-request-id'));
        }
      }),
      { numRuns: 400, seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31) },
    );
    // no request polluted a prototype anywhere in this process
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // storage is whole: every agent has its snapshots and their contents, the index only lists live agents
    const agentKeys = (await stack.redis.keys('ag:{*}')).filter((k) => /^ag:\{[^}]+\}$/.test(k));
    for (const key of agentKeys) {
      const [version, head, archived] = await stack.redis.hmget(key, 'version', 'head', 'archived');
      const id = key.slice(4, -1);
      expect(Number(version)).toBeGreaterThanOrEqual(1);
      expect(await stack.redis.zcard(`ag:{${id}}:v`)).toBe(Number(version));
      expect(await stack.redis.exists(`ag:{${id}}:c:${head}`)).toBe(1);
      expect((await stack.redis.zscore('ag:{views}:index', id)) === null).toBe(archived === '1');
    }
    expect(statuses.get(500)).toBeUndefined();
  }, 120_000);
});
