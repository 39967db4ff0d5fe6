import { z } from 'zod';
import type { FlowIssue, SchemaField, SchemaFieldType } from './types.js';

/**
 * The params of each node type as zod schemas. A builder's draft is forgiving — numbers may come as text
 * from form inputs, an empty field means "not set" — so each param is read by a small reader that takes
 * what can be taken, falls back to its default, and reports what is wrong as an issue with one of the
 * compiler's two param codes. `{key}` and `{type}` in a message stand for the param and the node type.
 */

type ParamCode = 'PARAM_MISSING' | 'PARAM_OUT_OF_RANGE';
type Report = (code: ParamCode, message: string) => void;
type Reader<T> = (value: unknown, report: Report) => T;

const readers = new WeakMap<z.ZodType, Reader<unknown>>();

// optional on the way in: an absent key is read too (its reader decides what absent means)
const pipeOf = <T>(read: Reader<T>) =>
  z
    .unknown()
    .optional()
    .transform((value, ctx) =>
      read(value, (code, message) => ctx.addIssue({ code: 'custom', message, params: { code } })),
    );

/** A param read by `read`. */
function param<T>(read: Reader<T>): z.ZodType<T> {
  const schema = pipeOf(read);
  readers.set(schema, read);
  return schema;
}

/** A param that may be absent (zod wants an object key that reads as undefined to say so). */
function optionalParam<T>(read: Reader<T | undefined>): z.ZodType<T | undefined> {
  const schema = pipeOf(read).optional();
  readers.set(schema, read);
  return schema;
}

const empty = (v: unknown) => v === undefined || v === null || v === '';
const needs: ParamCode = 'PARAM_MISSING';
const range: ParamCode = 'PARAM_OUT_OF_RANGE';

// ---- readers: what a draft's value is taken as, and what is wrong with it ----

const readText =
  (o: { required?: boolean; def?: string; max?: number } = {}): Reader<string> =>
  (v, report) => {
    if (empty(v)) {
      if (o.required) report(needs, '{type} needs `{key}`');
      return o.def ?? '';
    }
    if (typeof v !== 'string') {
      report(range, '`{key}` must be text');
      return o.def ?? '';
    }
    if (o.max !== undefined && v.length > o.max)
      report(range, `\`{key}\` must be at most ${o.max} characters`);
    return v;
  };

const readBool =
  (def: boolean): Reader<boolean> =>
  (v, report) => {
    if (v === undefined || v === null) return def;
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    report(range, '`{key}` must be true or false');
    return def;
  };

/** A number, or text that parses as one (form inputs send text). */
const readNum =
  (o: { min: number; max: number; int?: boolean; def?: number; unit?: string }): Reader<number | undefined> =>
  (v, report) => {
    if (empty(v)) return o.def;
    const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
    if (!Number.isFinite(n) || (o.int && !Number.isInteger(n)) || n < o.min || n > o.max) {
      const kind = o.int ? 'a whole number' : 'a number';
      report(range, `\`{key}\` must be ${kind} from ${o.min} to ${o.max}${o.unit ? ` ${o.unit}` : ''}`);
      return o.def;
    }
    return n;
  };

const readUrl =
  (o: { required?: boolean } = {}): Reader<string> =>
  (v, report) => {
    const s = readText(o)(v, report);
    if (s === '') return s;
    const parsed = URL.canParse(s) ? new URL(s) : undefined;
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
      report(range, '`{key}` must be an http(s) URL');
    }
    return s;
  };

const readOneOf =
  <T extends string>(values: readonly T[], def: T): Reader<T> =>
  (v, report) => {
    const s = readText({ def })(v, report) as T;
    if (!values.includes(s)) {
      report(range, `\`{key}\` must be ${values.join(', ').replace(/, ([^,]+)$/, ' or $1')}`);
    }
    return s;
  };

/** A list of non-empty texts. `optional`: absent stays absent (not an empty list). */
const readStrings =
  (o: { required?: boolean; max?: number; optional?: boolean } = {}): Reader<string[] | undefined> =>
  (v, report) => {
    if (o.optional && v === undefined) return undefined;
    if (v === undefined || v === null) {
      if (o.required) report(needs, '{type} needs `{key}`');
      return [];
    }
    if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && x.trim() !== '')) {
      report(range, '`{key}` must be a list of non-empty texts');
      return [];
    }
    if (o.required && v.length === 0) report(needs, '`{key}` must not be empty');
    if (o.max !== undefined && v.length > o.max) report(range, `\`{key}\` may hold at most ${o.max} entries`);
    return v as string[];
  };

/** Names to texts (HTTP headers). */
const readTextMap: Reader<Record<string, string>> = (v, report) => {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v) || !Object.values(v).every((x) => typeof x === 'string')) {
    report(range, '`{key}` must map names to texts');
    return {};
  }
  return v as Record<string, string>;
};

const SCHEMA_TYPES = new Set<SchemaFieldType>(['string', 'int', 'float', 'boolean', 'list', 'enum']);
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function readField(f: unknown, i: number, seen: Set<string>, report: Report): SchemaField[] {
  const { name, type, options, description } = (f ?? {}) as Record<string, unknown>;
  if (typeof name !== 'string' || !FIELD_NAME.test(name) || seen.has(name)) {
    report(range, `field ${i + 1} needs a unique name of letters, digits and _`);
    return [];
  }
  seen.add(name);
  if (!SCHEMA_TYPES.has(type as SchemaFieldType)) {
    report(range, `field \`${name}\` has no valid type (string, int, float, boolean, list, enum)`);
    return [];
  }
  const listed = Array.isArray(options) && options.length > 0 && options.every((o) => typeof o === 'string');
  if (type === 'enum' && !listed) {
    report(range, `enum field \`${name}\` needs its options`);
    return [];
  }
  return [
    {
      name,
      type: type as SchemaFieldType,
      description: typeof description === 'string' ? description : undefined,
      options: type === 'enum' ? (options as string[]) : undefined,
    },
  ];
}

/** The fields a structured-output step extracts; a field that is wrong is reported and left out. */
const readSchemaFields: Reader<SchemaField[]> = (v, report) => {
  if (!Array.isArray(v) || v.length === 0) {
    report(needs, '{type} needs at least one field in `{key}`');
    return [];
  }
  const seen = new Set<string>();
  return v.flatMap((f: unknown, i) => readField(f, i, seen, report));
};

const BCP47 = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/;
const readLanguage: Reader<string> = (v, report) => {
  const s = readText({ def: 'en', max: 35 })(v, report);
  if (!BCP47.test(s)) report(range, '`{key}` must be a BCP-47 tag such as en or en-US');
  return s;
};

// ---- the params of each node type ----

const text = (o?: Parameters<typeof readText>[0]) => param(readText(o));
/** Text that is absent when empty. */
const optionalText = () => optionalParam<string>((v, report) => readText()(v, report) || undefined);

/** Who the agent is: on the `agent` node, or on the older serialization's `persona` node. */
const persona = {
  name: text({ def: 'Agent', max: 200 }),
  instructions: text({ max: 50_000 }),
  language: param(readLanguage),
};
const llm = {
  provider: text({ required: true }),
  model: optionalText(),
  temperature: optionalParam<number>(readNum({ min: 0, max: 2 })),
  maxTokens: optionalParam<number>(readNum({ min: 1, max: 200_000, int: true })),
  baseURL: optionalParam<string>((v, report) => readUrl()(v, report) || undefined),
};

/** Each node type's params. */
export const PARAMS = {
  agent: z.object({ ...persona, allowInterruptions: param(readBool(true)) }),
  framework: z.object({ allowInterruptions: param(readBool(true)) }),
  persona: z.object(persona),
  llm: z.object(llm),
  tts: z.object({ provider: text({ required: true }), model: optionalText(), voiceId: optionalText() }),
  stt: z.object({
    provider: text({ required: true }),
    model: optionalText(),
    language: optionalText(),
    keyterms: optionalParam<string[]>(readStrings({ optional: true })),
  }),
  mcp: z.object({
    serverUrl: param(readUrl({ required: true })),
    authType: param(readOneOf(['none', 'bearer', 'api_key'] as const, 'none')),
    authValue: optionalText(),
    selectedTools: param((v, report) => readStrings()(v, report) ?? []),
  }),
  start: z.object({ command: text({ required: true }), isLiteral: param(readBool(false)) }),
  burst: z.object({
    command: text(),
    rounds: param((v, r) => readNum({ min: 1, max: 10, int: true, def: 1 })(v, r) ?? 1),
  }),
  opentalk: z.object({ command: text() }),
  timer: z.object({
    command: text(),
    duration: param((v, r) => readNum({ min: 30, max: 1800, def: 30, unit: 'seconds' })(v, r) ?? 30),
  }),
  ifelse: z.object({ conditionText: text({ required: true }) }),
  categorize: z.object({
    command: text(),
    categories: param((v, r) => readStrings({ required: true, max: 20 })(v, r) ?? []),
  }),
  transfer: z.object({ targetAgentId: text({ required: true }) }),
  end: z.object({ command: text(), isLiteral: param(readBool(false)) }),
  structured_output: z.object({ command: text(), schemaFields: param(readSchemaFields) }),
  webhook: z.object({ url: param(readUrl({ required: true })), headers: param(readTextMap) }),
} as const;

export type ParamsOf<K extends keyof typeof PARAMS> = z.output<(typeof PARAMS)[K]>;

/** The value each reader makes of the node, whatever its issues (every reader falls back to its default). */
function valuesOf(schema: z.ZodObject, node: Record<string, unknown>): Record<string, unknown> {
  const ignore: Report = () => undefined;
  const values: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(schema.shape))
    values[key] = readers.get(field)!(node[key], ignore);
  return values;
}

/**
 * The node's params of type `kind`, and each problem with them as an issue on the node: zod's issues, each
 * mapped to its param code and given the param's name.
 */
export function readParams<K extends keyof typeof PARAMS>(
  node: Record<string, unknown> & { id: string },
  kind: K,
  nodeType: string = kind,
): { params: ParamsOf<K>; issues: FlowIssue[] } {
  const schema = PARAMS[kind];
  const result = schema.safeParse(node);
  const issues: FlowIssue[] = result.success
    ? []
    : result.error.issues.map((i) => ({
        code: ((i as { params?: { code?: ParamCode } }).params?.code ?? range) as ParamCode,
        message: i.message.replaceAll('{key}', String(i.path[0] ?? '')).replaceAll('{type}', nodeType),
        nodeId: node.id,
      }));
  const params = result.success ? result.data : valuesOf(schema as unknown as z.ZodObject, node);
  return { params: params as ParamsOf<K>, issues };
}
