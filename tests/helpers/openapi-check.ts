import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
}
type Schema = Record<string, unknown>;

/** `cases[].repeats[]` as steps: a property's name, or `[]` into an array's items. */
const steps = (part: string) =>
  part.split('.').flatMap((p) => (p.endsWith('[]') ? [p.slice(0, -2), '[]'] : [p]));
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components?: unknown;
}

/** `#/components/…` as a reference into the document registered under `api`. */
function rebased(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rebased);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `api${v}` : rebased(v),
      ]),
    );
  }
  return value;
}

/**
 * Checks answers against the API document the gateway serves: an operation the document lists must
 * answer a status it lists, with a body its schema accepts. So an answer the document does not describe
 * fails the test that received it.
 */
export class DocumentCheck {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly templates: { pattern: RegExp; path: string; params: number }[];

  constructor(private readonly doc: Document) {
    // the document's formats (uri, date-time, …) are checked, not ignored with a warning on every test's stderr
    addFormats.default(this.ajv);
    this.ajv.addSchema({ $id: 'api', components: rebased(doc.components) });
    this.templates = Object.keys(doc.paths)
      .map((path) => ({
        path,
        params: (path.match(/\{/g) ?? []).length,
        pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      }))
      // a literal segment wins over a parameter, as in the router
      .sort((a, b) => a.params - b.params);
  }

  /** Undefined when the answer is one the document describes (or the request is none of its operations). */
  problem(method: string, url: string, status: number, body: unknown): string | undefined {
    const path = new URL(url, 'http://x').pathname;
    const template = this.templates.find((t) => t.pattern.test(path));
    const op = template && this.doc.paths[template.path]?.[method.toLowerCase()];
    if (!template || !op) return undefined;
    const response = op.responses[String(status)] ?? op.responses.default;
    if (!response) return `${method} ${template.path} answered ${status}, which the document does not list`;
    const schema = response.content?.['application/json']?.schema;
    if (!schema) return undefined;
    const key = `${method} ${template.path} ${status}`;
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(rebased(schema) as object);
      this.compiled.set(key, validate);
    }
    if (validate(body)) return undefined;
    return `${key}: the body is not what the document says: ${this.ajv.errorsText(validate.errors)}`;
  }

  /**
   * Undefined when `value` is what the document says `method path` (a template of the document,
   * `/api/agents/{id}`) answers with `status` — its JSON body, or one event of its stream — or, with `part`
   * (`cases[].repeats[]`), that part of it; else what is wrong. For the docs' examples of answers.
   */
  exampleProblem(method: string, path: string, status: number, value: unknown, part?: string) {
    const op = this.doc.paths[path]?.[method.toLowerCase()];
    if (!op) return `the document has no operation ${method} ${path}`;
    const content = op.responses[String(status)]?.content ?? {};
    let schema = (content['application/json'] ?? content['text/event-stream'])?.schema as Schema | undefined;
    if (!schema) return `the document has no JSON answer ${status} of ${method} ${path}`;
    for (const step of part ? steps(part) : []) {
      const here = this.resolved(schema);
      const props = here.properties as Record<string, Schema> | undefined;
      const next = step === '[]' ? (here.items as Schema | undefined) : props?.[step];
      if (!next) return `${method} ${path} ${status} has no ${part}`;
      schema = next;
    }
    const validate = this.ajv.compile(rebased(schema) as object);
    return validate(value) ? undefined : this.ajv.errorsText(validate.errors);
  }

  /** A schema with its `$ref` into the document followed, and `T | null` read as T. */
  private resolved(schema: Schema): Schema {
    const ref = schema.$ref;
    if (typeof ref === 'string' && ref.startsWith('#/')) {
      const target = ref
        .slice(2)
        .split('/')
        .reduce<unknown>((at, key) => (at as Record<string, unknown>)[key], this.doc);
      return this.resolved(target as Schema);
    }
    const some = (schema.anyOf as Schema[] | undefined)?.filter((s) => s.type !== 'null');
    return some?.length === 1 ? this.resolved(some[0]!) : schema;
  }
}

const checks = new Map<string, Promise<DocumentCheck>>();

/** The check for the gateway at `baseUrl`, made from the document it serves (fetched once). */
export function documentCheck(baseUrl: string): Promise<DocumentCheck> {
  let check = checks.get(baseUrl);
  if (!check) {
    check = fetch(`${baseUrl}/openapi.json`)
      .then((res) => res.json() as Promise<Document>)
      .then((doc) => new DocumentCheck(doc));
    checks.set(baseUrl, check);
  }
  return check;
}
