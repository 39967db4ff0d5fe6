import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import {
  Agent,
  AgentSummary,
  AgentVersion,
  contract,
  ConversationEntry,
  DeployRecord,
  Flow,
  FlowIssue,
  FlowValidation,
  httpStatusOf,
  HttpErrorBody,
  JsonValue,
  PlaygroundSession,
  ProviderKeyStatus,
  SessionEvent,
  SessionMessage,
  SimpleEdge,
  SimpleNode,
  specOf,
  Subjects,
  TestSession,
  TextTurnResult,
  VersionSummary,
  type ErrorCode,
  TestCase,
  Simulation,
  CaseObservation,
  CaseResult,
  TestRun,
} from '@vab/contracts';
import { EXAMPLE_FLOW, nodeJsonSchemas } from '@vab/flow';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import type { AnyRoute } from './route-table.js';

// Named once, referenced everywhere: the document (and the typed client made from it) calls them so.
const NAMED: [z.ZodType, string][] = [
  [HttpErrorBody, 'Error'],
  [Agent, 'Agent'],
  [AgentSummary, 'AgentSummary'],
  [AgentVersion, 'AgentVersion'],
  [VersionSummary, 'VersionSummary'],
  [Flow, 'Flow'],
  [SimpleNode, 'SimpleNode'],
  [SimpleEdge, 'SimpleEdge'],
  [ConversationEntry, 'ConversationEntry'],
  [TestSession, 'TestSession'],
  [SessionMessage, 'SessionMessage'],
  [DeployRecord, 'DeployRecord'],
  [FlowIssue, 'FlowIssue'],
  [FlowValidation, 'FlowValidation'],
  [TextTurnResult, 'TextTurnResult'],
  [PlaygroundSession, 'PlaygroundSession'],
  [ProviderKeyStatus, 'ProviderKeyStatus'],
  [JsonValue, 'JsonValue'],
  // the test-run shapes, each in several answers: named once, the document is a third of its size
  [TestCase, 'TestCase'],
  [Simulation, 'Simulation'],
  [CaseObservation, 'CaseObservation'],
  [CaseResult, 'CaseResult'],
  [TestRun, 'TestRun'],
];
for (const [schema, id] of NAMED) if (!z.globalRegistry.has(schema)) z.globalRegistry.add(schema, { id });

/** The operation id of a route: its subject's name in `Subjects` (`agentsCreate`, …). */
const OPERATION_IDS = new Map<string, string>(
  Object.entries(Subjects).map(([name, subject]) => [subject, name]),
);
export const operationIdOf = (r: AnyRoute): string => OPERATION_IDS.get(r.subject) ?? r.subject;

/** What any API route may answer besides its service's own errors: the edge's and the bus's. */
const TRANSPORT_ERRORS: ErrorCode[] = [
  'VALIDATION_FAILED',
  'INVALID_JSON',
  'UNAUTHORIZED',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'INTERNAL',
  'SERVICE_UNAVAILABLE',
  'TIMEOUT',
];

/** Every error code a route can answer, by HTTP status. */
function errorsOf(r: AnyRoute): Map<number, ErrorCode[]> {
  const spec = specOf(r.subject);
  const codes = new Set<ErrorCode>([
    ...TRANSPORT_ERRORS,
    // a body on a route that takes none is still parsed, so a non-JSON one is refused anywhere but GET
    ...(r.method !== 'GET' ? (['UNSUPPORTED_MEDIA_TYPE'] as const) : []),
    ...(spec.idempotent ? (['CONFLICT'] as const) : []),
    ...(spec.etag && r.method !== 'GET' ? (['PRECONDITION_FAILED'] as const) : []),
    ...(spec.noResponders ? [spec.noResponders.code] : []),
    ...spec.errors,
  ]);
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = httpStatusOf[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

const TAGS = [
  { name: 'agents', description: 'Agents, their flows and version snapshots' },
  { name: 'conversations', description: "The builder's chat history of an agent" },
  { name: 'test-sessions', description: 'Test sessions and their transcripts' },
  { name: 'deploys', description: 'Deploy records' },
  { name: 'playground', description: 'Flow validation, the voice playground and provider key status' },
  { name: 'text-sessions', description: 'Typed test conversations with a flow' },
  {
    name: 'voice-sessions',
    description: 'Spoken conversations with a flow over a WebSocket, no media server needed',
  },
  { name: 'stats', description: 'Turn figures, usage and errors per version and per agent' },
  { name: 'tests', description: 'Regression test cases, test runs and the deploy gate' },
  { name: 'tickets', description: 'Single-use tickets for what a browser cannot send a header on' },
  { name: 'phone-numbers', description: 'Phone numbers and the agent whose live deploy answers each' },
  { name: 'webhooks', description: "Signed webhooks of an agent's events, their deliveries and retries" },
];

/** The API's name: the document's title, and the reference page's. */
export const API_TITLE = 'Voice agent builder backend';

type TransformInput = Parameters<typeof jsonSchemaTransform>[0] & {
  route: { config?: { api?: AnyRoute } };
};
type OpenApiDocument = OpenAPIV3_1.Document;

/**
 * @fastify/swagger, from the routes' own zod schemas (fastify-type-provider-zod turns them into JSON
 * Schema); the two transforms only add what a zod schema cannot say: response headers, a request example,
 * and that an optional body is optional.
 */
export function swaggerOptions(
  routes: readonly AnyRoute[],
  publicUrl?: string,
): FastifyDynamicSwaggerOptions {
  const optionalBodies = new Set(routes.filter((r) => r.bodyOptional).map(operationIdOf));
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: API_TITLE,
        version: '0.2.0',
        description:
          'REST API of the agent builder: agents and their version snapshots, builder chat, test sessions, ' +
          'deploys, the voice playground and flow validation. Every error has one shape (Error).\n\n' +
          'A flow is `{ nodes, edges }`; each node type, its handles and its params (types, defaults, ranges, ' +
          'what it does at run time) are the schemas `AgentNode`, `StartNode`, … below, and the flow ' +
          'reference in the repository, docs/flow-reference.md, with a complete example flow (also the ' +
          'example of `Flow`).',
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [
        publicUrl
          ? { url: publicUrl.replace(/\/+$/, ''), description: 'This API (PUBLIC_URL)' }
          : { url: '/', description: 'The origin that serves this document' },
      ],
      tags: TAGS,
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description:
              'One of the API tokens of the gateway (API_TOKENS). Needed only when the server sets them; ' +
              'otherwise the API is open and the header is ignored.',
          },
        },
      },
      security: [{ bearerAuth: [] }],
    },
    transform: (input) => {
      const out = jsonSchemaTransform(input);
      const r = (input as TransformInput).route.config?.api;
      const spec = r && specOf(r.subject);
      const schema = out.schema as Record<string, unknown> & {
        body?: Record<string, unknown>;
        response?: Record<string, Record<string, unknown>>;
      };
      if (!r || schema.hide) return out;
      const success = schema.response?.[String(r.status ?? 200)];
      if (success) {
        success.headers = {
          'X-Request-Id': { type: 'string', description: 'The request id (the caller’s, or made here)' },
          ...(spec?.etag
            ? { ETag: { type: 'string', description: 'The agent’s entity tag, for If-Match' } }
            : {}),
          ...(spec?.idempotent
            ? { 'Idempotent-Replayed': { type: 'string', description: '`true` on a replayed answer' } }
            : {}),
        };
      }
      if (schema.body && r.example !== undefined) schema.body.examples = [r.example];
      return out;
    },
    transformObject: (input) => {
      const doc = jsonSchemaTransformObject(input) as OpenApiDocument;
      for (const item of Object.values(doc.paths ?? {})) {
        for (const op of Object.values(item ?? {}) as (OpenAPIV3_1.OperationObject | undefined)[]) {
          if (op?.operationId && optionalBodies.has(op.operationId) && op.requestBody) {
            (op.requestBody as OpenAPIV3_1.RequestBodyObject).required = false;
          }
        }
      }
      return withNodeTypes(withoutUnused(doc)) as never;
    },
  };
}

/** `structured_output` → `StructuredOutputNode`. */
const componentOf = (nodeType: string) =>
  `${nodeType.replace(/(^|_)([a-z])/g, (_, __: string, c: string) => c.toUpperCase())}Node`;

/**
 * The node types as schemas of their own (from the flow compiler's tables, as docs/flow-reference.md), and a
 * node as one of them or any other: storage keeps any node with an id (a draft, a type this server does not
 * know), so `OtherNode` is what the contract checks; the flow's example is the full one of the reference.
 */
function withNodeTypes(doc: OpenApiDocument): OpenApiDocument {
  const schemas = { ...doc.components?.schemas } as Record<string, OpenAPIV3_1.SchemaObject>;
  const refs: OpenAPIV3_1.ReferenceObject[] = [];
  for (const [nodeType, schema] of Object.entries(nodeJsonSchemas())) {
    schemas[componentOf(nodeType)] = schema as OpenAPIV3_1.SchemaObject;
    refs.push({ $ref: `#/components/schemas/${componentOf(nodeType)}` });
  }
  for (const name of ['SimpleNode', 'SimpleNodeInput']) {
    const generic = schemas[name];
    if (!generic) continue;
    schemas.OtherNode ??= {
      ...generic,
      description: 'A node of a type this server does not run, or a half-built one: stored as sent.',
    };
    schemas[name] = {
      description:
        'A node: `{ id, nodeType, ...params }`, its params flat on the node (docs/flow-reference.md). Any node ' +
        'with an id is stored as sent; validate and a run report what does not compile.',
      anyOf: [...refs, { $ref: '#/components/schemas/OtherNode' }],
    };
  }
  for (const name of ['Flow', 'FlowInput']) {
    if (schemas[name]) schemas[name] = { ...schemas[name], examples: [EXAMPLE_FLOW] };
  }
  return { ...doc, components: { ...doc.components, schemas } };
}

/** The document without the component schemas nothing refers to (zod's input and output twins). */
function withoutUnused(doc: OpenApiDocument): OpenApiDocument {
  const schemas = doc.components?.schemas ?? {};
  const used = new Set<string>();
  const refsIn = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(refsIn);
    else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')) {
          const name = v.slice('#/components/schemas/'.length);
          if (!used.has(name)) {
            used.add(name);
            refsIn(schemas[name]);
          }
        } else refsIn(v);
      }
    }
  };
  refsIn(doc.paths);
  const kept = Object.fromEntries(Object.entries(schemas).filter(([name]) => used.has(name)));
  return { ...doc, components: { ...doc.components, schemas: kept } };
}

/** The error answers of a route outside the table (events, recordings), by code: status, code, error body. */
export function errorResponses(...codes: ErrorCode[]): Record<number, unknown> {
  return Object.fromEntries(
    codes.map((code) => [
      httpStatusOf[code],
      { description: `\`${code}\``, content: { 'application/json': { schema: HttpErrorBody } } },
    ]),
  );
}

/** The response schemas of a route: its success, and one entry per error status naming the codes. */
export function responsesOf(r: AnyRoute): Record<number, unknown> {
  const json = (schema: z.ZodType) => ({ 'application/json': { schema } });
  const success = json(contract[r.subject].response);
  const responses: Record<number, unknown> = {
    [r.status ?? 200]: {
      description: 'Success',
      // a turn also streams, with Accept: text/event-stream: its events, then `result`
      content: r.streamsEvents ? { ...success, 'text/event-stream': { schema: SessionEvent } } : success,
    },
  };
  for (const [status, codes] of errorsOf(r)) {
    responses[status] = {
      description: codes.map((c) => `\`${c}\``).join(', '),
      content: json(HttpErrorBody),
    };
  }
  return responses;
}
