import type { Flow } from '@vab/contracts';
import { compile } from '@vab/flow';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { documentCheck } from '../../helpers/openapi-check.js';
import { api, startStack, type Stack } from '../../helpers/stack.js';

/**
 * Every JSON example of docs/api.md and docs/flow-reference.md, run against a stack as the docs say. Each
 * example's fenced block is announced by an HTML comment on the line before it (unseen where the docs are
 * rendered; the prose says the same for a reader):
 *
 * - `<!-- example: POST /api/agents/:id/test-cases -->`: a request body, sent to that route, must be
 *   accepted (2xx). `:id` is an agent whose flow is the flow reference's complete example.
 * - `<!-- example: POST /api/agents → 400 -->`: an answer of that route with that status, which must be what
 *   the API document says it answers (a stream's answer: each `data:` line an event of it); `, at
 *   cases[].repeats[]` names the part of the answer the example shows.
 * - `<!-- example: flow -->`: a flow, which must compile and pass validation on the stack.
 * - `…; not run here: <why>` (a real provider, say): the example is counted, and skipped.
 *
 * A JSON block without its comment fails, so a new example cannot go unchecked.
 */

const root = join(import.meta.dirname, '..', '..', '..');
const DOCS = ['docs/api.md', 'docs/flow-reference.md'];

type Kind =
  | { kind: 'request'; method: string; path: string }
  | { kind: 'answer'; method: string; path: string; status: number; part: string | undefined }
  | { kind: 'flow' };

interface Example {
  /** `docs/api.md:616`: where the block starts. */
  at: string;
  marker: string;
  what: Kind;
  notRun: string | undefined;
  text: string;
}

const MARKER = /^\s*<!-- example: (.+?) -->\s*$/;
const ROUTE = /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)(?: → (\d{3})(?:, at (\S+))?)?$/;

function kindOf(spec: string): Kind {
  if (spec === 'flow') return { kind: 'flow' };
  const m = ROUTE.exec(spec);
  if (!m) throw new Error(`an example marker says what it is: "${spec}" is none of the forms`);
  const [, method, path, status, part] = m;
  return status
    ? { kind: 'answer', method: method!, path: path!, status: Number(status), part }
    : { kind: 'request', method: method!, path: path! };
}

/** A block that is JSON, or a stream whose `data:` lines are: what counts as a JSON example. */
function looksLikeJson(info: string, text: string): boolean {
  if (info === 'json') return true;
  try {
    JSON.parse(text);
    return true;
  } catch {
    return /^data: [{[]/m.test(text);
  }
}

/** Every fenced block of a doc: its examples (with their markers) and the JSON blocks that lack one. */
function examplesOf(doc: string): { examples: Example[]; unmarked: string[] } {
  const lines = readFileSync(join(root, doc), 'utf8').split('\n');
  const examples: Example[] = [];
  const unmarked: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, info] = open;
    let end = i + 1;
    while (end < lines.length && lines[end]!.trim() !== '```') end++;
    const text = lines
      .slice(i + 1, end)
      .map((l) => l.slice(indent!.length))
      .join('\n');
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const marker = MARKER.exec(lines[before] ?? '')?.[1];
    const at = `${doc}:${i + 1}`;
    if (marker) {
      const [spec, notRun] = marker.split(/; not run here: /);
      examples.push({ at, marker, what: kindOf(spec!.trim()), notRun, text });
    } else if (looksLikeJson(info!, text)) {
      unmarked.push(at);
    }
    i = end;
  }
  return { examples, unmarked };
}

const found = DOCS.map(examplesOf);
const examples = found.flatMap((f) => f.examples);

let stack: Stack;
let http: ReturnType<typeof api>;
/** The agent `:id` stands for in the examples: its flow is flow-reference.md's complete example. */
let agentId: string;

/** The flow reference's complete example, as written there. */
function documentedFlow(): Flow {
  const flows = examples.filter((e) => e.what.kind === 'flow');
  expect(flows).toHaveLength(1);
  return JSON.parse(flows[0]!.text) as Flow;
}

beforeAll(async () => {
  stack = await startStack();
  http = api(stack.baseUrl);
  const created = await http.post('/api/agents', { name: 'Front desk', flow: documentedFlow() });
  expect(created.status).toBe(201);
  agentId = created.body.id as string;
});
afterAll(async () => {
  await stack?.close();
});

/** A route as the docs write it (`:id`) filled in for a request. */
function pathOf(path: string): string {
  return path.replace(/:(\w+)/g, (_, name: string) => {
    if (name === 'id') return agentId;
    throw new Error(`no value for :${name}: give the examples one`);
  });
}

/** A route as the docs write it, as the API document names it (`/api/agents/{id}`). */
const templateOf = (path: string) => path.replace(/:(\w+)/g, '{$1}');

/** The JSON of an answer's example: the body, or each event of a stream. */
function valuesOf(text: string): unknown[] {
  const data = text.split('\n').filter((l) => l.startsWith('data: '));
  return data.length > 0 ? data.map((l) => JSON.parse(l.slice(6)) as unknown) : [JSON.parse(text)];
}

describe('the JSON examples of the docs, run against the stack', () => {
  it('finds every JSON block marked with what it is', () => {
    expect(found.flatMap((f) => f.unmarked)).toEqual([]);
    const notRun = examples.filter((e) => e.notRun !== undefined);
    // the count a reader of the run sees: examples that need what a test cannot have (a real provider)
    console.info(`docs examples: ${examples.length - notRun.length} run, ${notRun.length} not run here`);
    expect(examples.length).toBeGreaterThanOrEqual(6);
    for (const e of notRun) expect(e.notRun!.trim(), e.at).not.toBe('');
  });

  for (const example of examples) {
    const run = example.notRun === undefined ? it : it.skip;
    run(`${example.at}: ${example.marker}`, async () => {
      const { what } = example;
      if (what.kind === 'flow') {
        const flow = JSON.parse(example.text) as Flow;
        expect(compile(flow)).toMatchObject({ ok: true });
        const validated = await http.post('/api/flows/validate', flow);
        expect(validated.status).toBe(200);
        expect(validated.body, JSON.stringify(validated.body.issues)).toMatchObject({
          valid: true,
          issues: [],
        });
      } else if (what.kind === 'request') {
        const res = await http.raw(what.method, pathOf(what.path), JSON.parse(example.text));
        expect(res.status, JSON.stringify(res.body)).toBeGreaterThanOrEqual(200);
        expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
      } else {
        const check = await documentCheck(stack.baseUrl);
        for (const value of valuesOf(example.text)) {
          const problem = check.exampleProblem(
            what.method,
            templateOf(what.path),
            what.status,
            value,
            what.part,
          );
          expect(problem).toBeUndefined();
        }
      }
    });
  }
});
