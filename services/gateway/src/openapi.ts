import { HttpErrorBody } from '@vab/contracts';
import { z } from 'zod';
import { responseSchemaOf, type AnyRoute } from './route-table.js';

const toJson = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

/** OpenAPI 3.1 generated from the route table and the contracts' zod schemas: it cannot drift from them. */
export function buildOpenApi(routes: readonly AnyRoute[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const params = r.params ? toJson(r.params, 'input') : undefined;
    const properties = (params?.properties ?? {}) as Record<string, unknown>;
    const op: Record<string, unknown> = {
      summary: r.summary,
      tags: [r.tag],
      operationId: r.subject,
      parameters: [
        ...Object.entries(properties).map(([name, schema]) => ({ name, in: 'path', required: true, schema })),
        ...(r.etag && r.method !== 'GET'
          ? [{ name: 'If-Match', in: 'header', required: false, schema: { type: 'string' } }]
          : []),
      ],
      responses: {
        [String(r.status ?? 200)]: {
          description: 'Success',
          ...(r.etag ? { headers: { ETag: { schema: { type: 'string' } } } } : {}),
          content: { 'application/json': { schema: toJson(responseSchemaOf(r), 'output') } },
        },
        '400': errorResponse('Invalid input; `issues` lists each field'),
        ...(r.params ? { '404': errorResponse('Not found') } : {}),
        ...(r.etag && r.method !== 'GET' ? { '412': errorResponse('If-Match is stale') } : {}),
        ...(r.body ? { '413': errorResponse('Body too large') } : {}),
        '503': errorResponse('The service behind this route is unavailable'),
        '504': errorResponse('The service did not answer in time'),
      },
    };
    if (r.body) {
      op.requestBody = {
        required: !r.bodyOptional,
        content: { 'application/json': { schema: toJson(r.body, 'input') } },
      };
    }
    paths[path] = { ...paths[path], [r.method.toLowerCase()]: op };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Voice agent builder backend',
      version: '0.1.0',
      description: 'REST API of the agent builder. Errors share one shape (components.schemas.Error).',
    },
    paths,
    components: { schemas: { Error: toJson(HttpErrorBody, 'output') } },
  };
}
