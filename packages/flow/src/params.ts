import type { SimpleNode } from '@vab/contracts';
import { z } from 'zod';
import { modelKindOf, type ModelKind } from './node-types.js';
import type { FlowIssue, SchemaField, SchemaFieldType } from './types.js';

/**
 * The params of each node type as zod schemas. A builder's draft is forgiving — numbers and switches may come
 * as text from form inputs, an empty field means "not set" — so each param coerces what a form sends, has its
 * default, and its range. A draft may be half-built: each param also says what stands in when its value is
 * wrong (`.catch`), so the compiler goes on and reports every problem at once. `{key}` and `{type}` in a
 * message stand for the param and the node type. Nothing here changes the flow: it is read, never rewritten.
 */

type ParamCode = 'PARAM_MISSING' | 'PARAM_OUT_OF_RANGE';

/** An empty form field ('' or null) is a param not set. */
const blank = (v: unknown) => (v === '' || v === null ? undefined : v);
const unset = <T extends z.ZodType>(schema: T) => z.preprocess(blank, schema);

/** The message of a required param: absent, or of the wrong kind. */
const needed = (wrong: string) => (iss: { input?: unknown }) =>
  iss.input === undefined ? '{type} needs `{key}`' : wrong;

// ---- the kinds of param ----

const text = (o: { required?: boolean; def?: string; max?: number } = {}) => {
  let s = z.string({ error: o.required ? needed('`{key}` must be text') : '`{key}` must be text' });
  if (o.max !== undefined) s = s.max(o.max, `\`{key}\` must be at most ${o.max} characters`);
  return unset(o.required ? s : s.default(o.def ?? '')).catch(o.def ?? '');
};

/** Text that is absent when empty. */
const optionalText = () => unset(z.string({ error: '`{key}` must be text' }).optional()).catch(undefined);

/** true or false, or their text (form inputs send text). */
const bool = (def: boolean) =>
  z
    .preprocess(
      (v) => (v === 'true' ? true : v === 'false' ? false : v === null ? undefined : v),
      z.boolean({ error: '`{key}` must be true or false' }).default(def),
    )
    .catch(def);

/** A number in its range; form inputs send text, which is read as the number it spells. */
function num(o: { min: number; max: number; int?: boolean; unit?: string }) {
  const error = `\`{key}\` must be ${o.int ? 'a whole number' : 'a number'} from ${o.min} to ${o.max}${o.unit ? ` ${o.unit}` : ''}`;
  const n = z.number({ error }).min(o.min, { error }).max(o.max, { error });
  return o.int ? n.int({ error }) : n;
}
const formNumber = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' ? Number(v) : blank(v)), schema);
const optionalNum = (o: Parameters<typeof num>[0]) => formNumber(num(o).optional()).catch(undefined);
const numOr = (o: Parameters<typeof num>[0] & { def: number }) =>
  formNumber(num(o).default(o.def)).catch(o.def);

/** An http(s) URL the server will call: each one goes through the egress policy (`urlsOf`). */
const urlSchema = (required: boolean) =>
  z.url({
    protocol: /^https?$/,
    error: required ? needed('`{key}` must be an http(s) URL') : '`{key}` must be an http(s) URL',
  });
const URL_SCHEMAS = new WeakSet<z.ZodType>();
const url = <T extends z.ZodType>(schema: T): T => (URL_SCHEMAS.add(schema), schema);
/** `description` as for `d` (a described schema is a new one: it is the one marked). */
const requiredUrl = (description: string) => url(unset(urlSchema(true)).catch('').describe(description));
const optionalUrl = (description: string) =>
  url(unset(urlSchema(false).optional()).catch(undefined).describe(description));

const orList = (values: readonly string[]) => values.join(', ').replace(/, ([^,]+)$/, ' or $1');
const oneOf = <T extends string>(values: readonly [T, ...T[]], def: T) =>
  unset(z.enum(values, { error: `\`{key}\` must be ${orList(values)}` }).default(def)).catch(def);

const isTextList = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === 'string' && x.trim() !== '');
const listError = '`{key}` must be a list of non-empty texts';
const nonEmptyText = z.string({ error: listError }).refine((s) => s.trim() !== '', listError);
const textList = (error: z.core.$ZodErrorMap | string = listError) => z.array(nonEmptyText, { error });

/** Names to texts (HTTP headers). */
const textMap = () =>
  z
    .record(z.string(), z.string({ error: '`{key}` must map names to texts' }), {
      error: '`{key}` must map names to texts',
    })
    .optional()
    .transform((m) => m ?? {})
    .catch({});

/** A phone number as E.164 writes it: `+`, a country code that does not start with 0, up to 15 digits in all. */
const E164 = /^\+[1-9][0-9]{6,14}$/;

const BCP47 = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/;
const language = () =>
  unset(
    z
      .string({ error: '`{key}` must be text' })
      .max(35, '`{key}` must be at most 35 characters')
      .regex(BCP47, '`{key}` must be a BCP-47 tag such as en or en-US')
      .default('en'),
  ).catch('en');

// ---- structured output's fields ----

const SCHEMA_TYPES = [
  'string',
  'int',
  'float',
  'boolean',
  'list',
  'enum',
] as const satisfies SchemaFieldType[];
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

const FIELD_NAME_ERROR = 'needs a unique name of letters, digits and _';
const schemaField = z
  .object(
    {
      name: z.string({ error: FIELD_NAME_ERROR }).regex(FIELD_NAME, FIELD_NAME_ERROR),
      type: z.enum(SCHEMA_TYPES, { error: `has no valid type (${SCHEMA_TYPES.join(', ')})` }),
      description: z.string().optional().catch(undefined),
      options: z.array(z.string()).optional().catch(undefined),
    },
    { error: 'must be an object with a name and a type' },
  )
  .superRefine((f, ctx) => {
    if (f.type === 'enum' && !f.options?.length) {
      ctx.addIssue({
        code: 'custom',
        path: ['options'],
        message: `enum field \`${f.name}\` needs its options`,
      });
    }
  })
  .transform((f): SchemaField => ({
    name: f.name,
    type: f.type,
    description: f.description,
    options: f.type === 'enum' ? f.options : undefined,
  }));

/** The fields a structured-output step extracts; in a draft, a field that is wrong is left out. */
const schemaFields = () =>
  z
    .array(schemaField, { error: needed('{type} needs at least one field in `{key}`') })
    .min(1, '{type} needs at least one field in `{key}`')
    .superRefine(
      (fields, ctx) => {
        const seen = new Set<string>();
        fields.forEach((f, i) => {
          const name = (f as { name?: unknown } | null)?.name;
          if (typeof name !== 'string') return;
          if (seen.has(name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: FIELD_NAME_ERROR });
          seen.add(name);
        });
      },
      // also when some fields are wrong (zod skips refinements then): every problem is reported at once
      { when: (payload) => Array.isArray(payload.value) },
    )
    .catch(({ value }) => {
      if (!Array.isArray(value)) return [];
      const seen = new Set<string>();
      return value.flatMap((f: unknown) => {
        const r = schemaField.safeParse(f);
        if (!r.success || seen.has(r.data.name)) return [];
        seen.add(r.data.name);
        return [r.data];
      });
    });

// ---- the params of each node type ----

/**
 * What a param means, as zod's own metadata (`.describe`, in zod's global registry): the flow reference and
 * the API document's node schemas print it.
 */
const d = <T extends z.ZodType>(description: string, schema: T): T => schema.describe(description);

/** Who the agent is: on the `agent` node, or on the older serialization's `persona` node. */
const persona = () => ({
  name: d("The agent's name.", text({ def: 'Agent', max: 200 })),
  instructions: d("The system prompt; the current step's `command` is added to it.", text({ max: 50_000 })),
  language: d("The conversation's language, a BCP-47 tag (`en`, `en-US`, `de`).", language()),
  drainGoodbye: d(
    "What the agent says before it ends a voice call that its server's update could not wait for (`DRAIN_TIMEOUT_MS`); empty: the server's `DRAIN_GOODBYE`.",
    text({ max: 500 }),
  ),
});

const allowInterruptions = () =>
  d('Whether the caller may interrupt the agent while it speaks (voice sessions).', bool(true));
const provider = (what: string) =>
  d(`Who runs the ${what} (the provider id, e.g. ${providerExamples[what]}).`, text({ required: true }));
const providerExamples: Record<string, string> = {
  model: '`openai`, `anthropic`, `google`, `groq`',
  voice: '`elevenlabs`, `cartesia`, `openai`, `deepgram`',
  recognition: '`deepgram`, `openai`',
};
const command = (what: string) => d(what, text());

/**
 * How the agent takes turns in a voice session (LiveKit's turn handling). Names and units are the builder's
 * (milliseconds), defaults LiveKit's own recommended ones.
 */
const turnHandling = () => ({
  allowInterruptions: allowInterruptions(),
  turnDetection: d(
    "What ends the caller's turn: `model` (LiveKit's end-of-turn model over the audio, run locally), `vad` " +
      "(the silence alone) or `stt` (the speech recognizer's end of speech).",
    oneOf(['model', 'vad', 'stt'] as const, 'model'),
  ),
  minEndpointingDelay: d(
    "The least silence after the caller's speech before their turn may end.",
    numOr({ min: 0, max: 3000, int: true, unit: 'ms', def: 500 }),
  ),
  maxEndpointingDelay: d(
    'The most the agent waits when the end-of-turn model says the caller is not done (at least `minEndpointingDelay`).',
    numOr({ min: 500, max: 30_000, int: true, unit: 'ms', def: 3000 }),
  ),
  minInterruptionDuration: d(
    'Speech shorter than this does not interrupt the agent.',
    numOr({ min: 0, max: 5000, int: true, unit: 'ms', def: 500 }),
  ),
  minInterruptionWords: d(
    'Words an interruption needs (from the speech recognizer).',
    numOr({ min: 0, max: 20, int: true, def: 0 }),
  ),
  falseInterruptionTimeout: d(
    'An interruption followed by no words for this long was not one.',
    numOr({ min: 100, max: 10_000, int: true, unit: 'ms', def: 2000 }),
  ),
  resumeFalseInterruption: d('After a false interruption, the agent resumes where it paused.', bool(true)),
  preemptiveGeneration: d(
    "LiveKit starts the model on the caller's final transcript, before the turn is confirmed; that reply is spoken when the step only answers the turn.",
    bool(true),
  ),
});

/**
 * A model node's `baseURL`, described as `server`, then the rules every such URL obeys (the egress policy, and
 * the key rule: the server gets the key only when trusted).
 */
const modelServerUrl = (server: string) =>
  optionalUrl(
    `${server}: it passes the egress policy, and gets the server's key only when \`TRUSTED_MODEL_URLS\` names it.`,
  );

/** Each node type's params, as a draft is read: wrong values give way to their fallback. */
export const PARAMS = {
  agent: z.object({ ...persona(), ...turnHandling() }),
  framework: z.object(turnHandling()),
  persona: z.object(persona()),
  llm: z.object({
    provider: provider('model'),
    model: d("The model id (the provider's default when unset).", optionalText()),
    temperature: d('Sampling temperature.', optionalNum({ min: 0, max: 2 })),
    maxTokens: d('The most tokens one answer may have.', optionalNum({ min: 1, max: 200_000, int: true })),
    baseURL: modelServerUrl(
      "An OpenAI-compatible server to call instead of the provider's (a local Ollama, vLLM, llama.cpp)",
    ),
  }),
  tts: z.object({
    provider: provider('voice'),
    model: d("The synthesis model (the provider's default when unset).", optionalText()),
    voiceId: d("The voice (the provider's default when unset).", optionalText()),
    baseURL: modelServerUrl(
      "A speech server to call instead of the provider's (openai: any OpenAI-compatible one; elevenlabs, " +
        'deepgram: an address only)',
    ),
  }),
  stt: z.object({
    provider: provider('recognition'),
    model: d("The recognition model (the provider's default when unset).", optionalText()),
    language: d("The language to recognize (the agent's when unset).", optionalText()),
    baseURL: modelServerUrl(
      "A speech server to call instead of the provider's (openai: any OpenAI-compatible one; deepgram: an " +
        'address only)',
    ),
    mode: d(
      'openai: `file` posts each utterance the VAD cuts to /audio/transcriptions (what every OpenAI-compatible ' +
        "server speaks); `realtime` streams over OpenAI's Realtime WebSocket (OpenAI's own URL only).",
      oneOf(['file', 'realtime'] as const, 'file'),
    ),
    // absent stays absent (not an empty list)
    keyterms: d('Words to recognize well (names, products).', textList().optional().catch(undefined)),
  }),
  mcp: z.object({
    serverUrl: requiredUrl('The MCP server (streamable HTTP); it passes the egress policy.'),
    authType: d('How to authenticate to the server.', oneOf(['none', 'bearer', 'api_key'], 'none')),
    authValue: d('The bearer token or API key, for `authType` `bearer` or `api_key`.', optionalText()),
    selectedTools: d(
      'The tools the agent may call (by name); empty: none.',
      unset(textList().default([])).catch([]),
    ),
  }),
  start: z.object({
    command: d('The opening line, or the instruction to make one from.', text({ required: true })),
    isLiteral: d('Say `command` word for word (no model is called for it).', bool(false)),
  }),
  burst: z.object({
    command: command('What to talk about in this step.'),
    rounds: d('How many exchanges before moving on.', numOr({ min: 1, max: 10, int: true, def: 1 })),
  }),
  opentalk: z.object({ command: command('What to talk about in this step.') }),
  timer: z.object({
    command: command('What to talk about in this step.'),
    duration: d(
      'How long the step lasts, in seconds.',
      numOr({ min: 30, max: 1800, unit: 'seconds', def: 30 }),
    ),
  }),
  ifelse: z.object({
    conditionText: d('The yes/no question the model answers over the transcript.', text({ required: true })),
  }),
  categorize: z.object({
    command: command('How to classify the conversation.'),
    // a list too long is reported and still read, so its exits are checked against what the builder drew
    categories: d(
      'The categories, one exit `cat_<i>` each; the last is taken when the model cannot decide.',
      unset(
        textList(needed(listError))
          .min(1, '`{key}` must not be empty')
          .max(20, '`{key}` may hold at most 20 entries'),
      ).catch(({ value }) => (isTextList(value) ? value : [])),
    ),
  }),
  // one of the two is set (the compiler checks): an agent of ours, or a person at a phone number
  transfer: z.object({
    targetAgentId: d(
      'The id of the stored agent to hand the session to (or set `targetNumber`).',
      optionalText(),
    ),
    targetNumber: d(
      'A phone number (E.164: `+` and up to 15 digits) a phone call is handed to (or set `targetAgentId`): ' +
        'Twilio dials it and the call ends `transferred`. On a call that is not a phone call the transfer fails.',
      unset(
        z
          .string({ error: '`{key}` must be text' })
          .regex(E164, '`{key}` must be an E.164 phone number such as +14155550100')
          .optional(),
      ).catch(undefined),
    ),
  }),
  end: z.object({
    command: command('The goodbye, or the instruction to make one from.'),
    isLiteral: d('Say `command` word for word (no model is called for it).', bool(false)),
  }),
  structured_output: z.object({
    command: command('What to extract, in words.'),
    schemaFields: d(
      'The fields to extract: `{ name, type, description?, options? }`, `options` for an `enum`.',
      schemaFields(),
    ),
  }),
  webhook: z.object({
    url: requiredUrl('Where to POST the result; it passes the egress policy.'),
    headers: d('HTTP headers to send (names to texts).', textMap()),
  }),
} as const;

export type ParamKind = keyof typeof PARAMS;
export type ParamsOf<K extends ParamKind> = z.output<(typeof PARAMS)[K]>;

type Shape = Record<string, z.ZodType>;
const shapeOf = (kind: ParamKind): Shape => PARAMS[kind].shape as Shape;

/** The same params with nothing giving way: what reports the issues. */
const STRICT = Object.fromEntries(
  (Object.keys(PARAMS) as ParamKind[]).map((kind) => [
    kind,
    z.object(
      Object.fromEntries(
        Object.entries(shapeOf(kind)).map(([key, s]) => [key, s instanceof z.ZodCatch ? s.unwrap() : s]),
      ),
    ),
  ]),
) as Record<ParamKind, z.ZodObject>;

/** A zod issue as one of the compiler's two param codes: a param not set, or one set wrong. */
function codeOf(issue: z.core.$ZodIssue, node: Record<string, unknown>): ParamCode {
  const key = issue.path[0];
  const absent = typeof key === 'string' && blank(node[key]) === undefined;
  if (issue.path.length === 1 && absent) return 'PARAM_MISSING';
  if (issue.code === 'too_small' && issue.origin === 'array' && issue.minimum === 1) return 'PARAM_MISSING';
  return 'PARAM_OUT_OF_RANGE';
}

/** The message, its param named; an issue inside a list of fields says which one (`field 2`). */
function messageOf(issue: z.core.$ZodIssue, nodeType: string): string {
  const [key, index] = issue.path;
  const message =
    typeof index === 'number' && !issue.message.includes('`')
      ? `field ${index + 1} ${issue.message}`
      : issue.message;
  return message.replaceAll('{key}', String(key ?? '')).replaceAll('{type}', nodeType);
}

/**
 * The node's params of type `kind`, and each problem with them as an issue on the node: zod's issues, each
 * mapped to its param code and given the param's name.
 */
export function readParams<K extends ParamKind>(
  node: Record<string, unknown> & { id: string },
  kind: K,
  nodeType: string = kind,
): { params: ParamsOf<K>; issues: FlowIssue[] } {
  const strict = STRICT[kind].safeParse(node);
  if (strict.success) return { params: strict.data as ParamsOf<K>, issues: [] };
  const issues = strict.error.issues.map((i) => ({
    code: codeOf(i, node),
    message: messageOf(i, nodeType),
    nodeId: node.id,
  }));
  return { params: PARAMS[kind].parse(node) as ParamsOf<K>, issues };
}

/** The params of each node type that hold a URL the server will call. */
export const URL_PARAMS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  (Object.keys(PARAMS) as ParamKind[]).flatMap((kind) => {
    const keys = Object.entries(shapeOf(kind))
      .filter(([, s]) => URL_SCHEMAS.has(s))
      .map(([key]) => key);
    return keys.length > 0 ? [[kind, keys]] : [];
  }),
);

/**
 * The URLs a node names, each with its param: only those that are set and read as URLs (the compiler reports
 * the others), for the egress policy to check.
 */
export function urlsOf(node: SimpleNode): { param: string; url: string }[] {
  const kind = typeof node.nodeType === 'string' ? node.nodeType : '';
  const params = Object.hasOwn(URL_PARAMS, kind) ? URL_PARAMS[kind]! : [];
  if (params.length === 0) return [];
  const read = PARAMS[kind as ParamKind].parse(node) as Record<string, unknown>;
  return params.flatMap((param) => {
    const url = read[param];
    return typeof url === 'string' && url !== '' ? [{ param, url }] : [];
  });
}

/** A model node's kind, provider and base URL as the compiler reads them; undefined for any other node. */
export function modelOf(
  node: SimpleNode,
): { kind: ModelKind; provider: string; baseURL?: string | undefined } | undefined {
  const kind = modelKindOf(typeof node.nodeType === 'string' ? node.nodeType : '');
  if (!kind) return undefined;
  const read = PARAMS[kind].parse(node) as { provider: string; baseURL?: string | undefined };
  return { kind, provider: read.provider, baseURL: read.baseURL };
}

/**
 * What a test case may mock in a flow: the tools its MCP nodes select (by the tool's name) and its webhook
 * nodes (by node id). Read leniently, as the compiler reads them: a draft that does not compile still has them.
 */
export function mockTargets(flow: { nodes: SimpleNode[] }): { tools: Set<string>; webhooks: Set<string> } {
  const tools = new Set<string>();
  const webhooks = new Set<string>();
  for (const node of flow.nodes) {
    if (node.nodeType === 'mcp') {
      for (const t of (PARAMS.mcp.parse(node) as { selectedTools: string[] }).selectedTools) tools.add(t);
    } else if (node.nodeType === 'webhook' && typeof node.id === 'string') {
      webhooks.add(node.id);
    }
  }
  return { tools, webhooks };
}

/** A param as the flow reference prints it: its JSON Schema (as a builder sends it) and what it means. */
export interface ParamDoc {
  name: string;
  description: string | undefined;
  /** Not set, the compiler reports `PARAM_MISSING`. */
  required: boolean;
  schema: Record<string, unknown>;
}

/** The params of a node type, from the same schemas the compiler reads them with. */
export function paramDocs(kind: ParamKind): ParamDoc[] {
  return Object.entries(shapeOf(kind)).map(([name, s]) => {
    // the description is the ParamDoc's own field (the API document puts it after the schema's keys)
    const { $schema: _, description, ...schema } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' });
    return {
      name,
      description,
      required: !STRICT[kind].shape[name]!.safeParse(undefined).success,
      schema,
    };
  });
}

export const isParamKind = (kind: string): kind is ParamKind => Object.hasOwn(PARAMS, kind);
