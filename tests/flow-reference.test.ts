import type { Flow, SimpleEdge, SimpleNode } from '@vab/contracts';
import { compile, EXAMPLE_FLOW, nodeTypes, PARAMS, type FlowIssue } from '@vab/flow';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const doc = readFileSync(join(import.meta.dirname, '..', 'docs', 'flow-reference.md'), 'utf8');

/**
 * A table row's cells as a GFM renderer splits them: a pipe is a cell's edge unless a backslash escapes it,
 * and `\\|` is an escaped backslash followed by an edge (so a cell escaped twice comes apart).
 */
function cellsOf(row: string): string[] {
  const cells: string[] = [];
  let cell = '';
  for (let i = 0; i < row.length; i++) {
    const c = row[i]!;
    if (c === '\\' && i + 1 < row.length) {
      cell += c + row[++i]!;
    } else if (c === '|') {
      cells.push(cell.trim());
      cell = '';
    } else {
      cell += c;
    }
  }
  cells.push(cell.trim());
  // the row's leading and trailing pipes
  return cells.slice(1, -1);
}

/** Every table of the document: its header's cells and each row's, with the row's line number. */
function tablesOf(text: string): { header: string[]; rows: { line: number; cells: string[] }[] }[] {
  const lines = text.split('\n');
  const tables: { header: string[]; rows: { line: number; cells: string[] }[] }[] = [];
  for (let i = 0; i + 1 < lines.length; i++) {
    if (!lines[i]!.startsWith('|') || !/^\|[\s|:-]+\|$/.test(lines[i + 1]!)) continue;
    const header = cellsOf(lines[i]!);
    const rows: { line: number; cells: string[] }[] = [];
    let j = i + 2;
    for (; j < lines.length && lines[j]!.startsWith('|'); j++) {
      rows.push({ line: j + 1, cells: cellsOf(lines[j]!) });
    }
    tables.push({ header, rows });
    i = j;
  }
  return tables;
}

interface Documented {
  params: { name: string; required: boolean; range: string }[];
}

/** The node types and params docs/flow-reference.md documents, read from its headings and tables. */
function documented(): Map<string, Documented> {
  const out = new Map<string, Documented>();
  for (const section of doc
    .split(/^### /m)
    .slice(1)
    .map((s) => s.split(/^## /m)[0]!)) {
    const type = /^`([^`]+)`/.exec(section)![1]!;
    const params = section
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map(cellsOf)
      .map(([name, , required, , range]) => ({
        name: name!.replaceAll('`', ''),
        required: required === 'yes',
        range: range!,
      }));
    out.set(type, { params });
  }
  return out;
}

/**
 * The issues on one node of `type`, set in a whole runnable flow (the docs' example, or its older
 * serialization for `framework`/`persona`) so the compiler reads it as it reads any node of its kind.
 */
function issuesOf(type: string, params: Record<string, unknown>, without?: string): FlowIssue[] {
  const flow = structuredClone(EXAMPLE_FLOW) as { nodes: SimpleNode[]; edges: SimpleEdge[] };
  if (type === 'framework' || type === 'persona') {
    const agent = flow.nodes.find((n) => n.nodeType === 'agent')!;
    flow.nodes = flow.nodes.filter((n) => n !== agent);
    flow.nodes.push(
      { id: agent.id, nodeType: 'framework', provider: 'livekit' },
      { id: 'persona-1', nodeType: 'persona', name: 'Front desk', instructions: 'Be brief.' },
    );
    flow.edges.push({
      source: 'persona-1',
      sourceHandle: 'output',
      target: agent.id,
      targetHandle: 'persona_in',
    });
  }
  const node = flow.nodes.find((n) => n.nodeType === type);
  if (!node) throw new Error(`no ${type} node to try`);
  Object.assign(node, params);
  if (without) delete node[without];
  const r = compile(flow);
  return r.ok ? [] : r.issues.filter((i) => i.nodeId === node.id);
}
const about = (issues: FlowIssue[], param: string, code: string) =>
  issues.filter((i) => i.code === code && i.message.includes(`\`${param}\``));

describe('the flow reference (docs/flow-reference.md) against the compiler', () => {
  const types = documented();

  it('documents every node type and param the compiler knows, and nothing else', () => {
    const known = Object.fromEntries(
      nodeTypes().map(([t]) => [t, Object.keys((PARAMS as Record<string, { shape: object }>)[t]!.shape)]),
    );
    const written = Object.fromEntries([...types].map(([t, d]) => [t, d.params.map((p) => p.name)]));
    expect(written).toEqual(known);
    // and each one has its meaning written
    expect(doc).not.toMatch(/\| +\|\n/);
  });

  it("keeps every table whole: each row has its header's cells, an enum's values in one cell", () => {
    const tables = tablesOf(doc);
    expect(tables.length).toBeGreaterThan(10);
    for (const { header, rows } of tables) {
      for (const { line, cells } of rows) expect(cells.length, `line ${line}`).toBe(header.length);
    }
    // an enum's values are one cell, each pipe between them escaped once (as the renderer shows it: a |)
    const turnDetection = tables.flatMap((t) => t.rows).find((r) => r.cells[0] === '`turnDetection`')!;
    expect(turnDetection.cells[1]).toBe('`"model"` \\| `"vad"` \\| `"stt"`');
  });

  it('names only node types the compiler runs, and the compiler refuses one it does not name', () => {
    const lone = (nodeType: string) => {
      const r = compile({ nodes: [{ id: 'n', nodeType }], edges: [] });
      return r.ok ? [] : r.issues.filter((i) => i.nodeId === 'n').map((i) => i.code);
    };
    for (const type of types.keys()) {
      expect(lone(type), type).not.toContain('UNKNOWN_NODE_TYPE');
      // and a node of that type, set in a runnable flow, runs
      expect(issuesOf(type, {}), type).toEqual([]);
    }
    expect(lone('not_documented')).toContain('UNKNOWN_NODE_TYPE');
  });

  it('marks required exactly the params the compiler reports missing', () => {
    for (const [type, { params }] of types) {
      for (const p of params) {
        const issues = issuesOf(type, {}, p.name);
        expect(about(issues, p.name, 'PARAM_MISSING').length > 0, `${type}.${p.name}`).toBe(p.required);
      }
    }
  });

  it('gives the ranges the compiler enforces', () => {
    let checked = 0;
    for (const [type, { params }] of types) {
      for (const p of params) {
        const m = /^(-?[\d.]+)–(-?[\d.]+)/.exec(p.range);
        if (!m) continue;
        const [min, max] = [Number(m[1]), Number(m[2])];
        for (const [value, wrong] of [
          [min, false],
          [max, false],
          [max + 1, true],
          [min - 1, true],
        ] as const) {
          const issues = about(issuesOf(type, { [p.name]: value }), p.name, 'PARAM_OUT_OF_RANGE');
          expect(issues.length > 0, `${type}.${p.name} = ${value}`).toBe(wrong);
        }
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(4);
  });

  it('has a complete example the compiler accepts', () => {
    const json = /```json\n([\s\S]*?)\n```/.exec(doc)![1]!;
    const flow = JSON.parse(json) as Flow;
    expect(compile(flow)).toMatchObject({ ok: true });
    const used = new Set(flow.nodes.map((n) => n.nodeType));
    for (const t of [
      'start',
      'burst',
      'ifelse',
      'categorize',
      'mcp',
      'transfer',
      'end',
      'structured_output',
    ]) {
      expect(used, t).toContain(t);
    }
    expect(used).toContain('webhook');
  });
});
