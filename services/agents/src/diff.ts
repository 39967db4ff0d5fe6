import type { EdgeRef, FieldChange, Flow, NodeChange, VersionDiff } from '@vab/contracts';

/**
 * Fields a canvas keeps for drawing (React Flow and the like), not for what the agent does: a change in
 * them alone is reported apart (`canvas`), never as a changed param.
 */
export const CANVAS_FIELDS = new Set([
  'position',
  'positionAbsolute',
  'measured',
  'width',
  'height',
  'selected',
  'dragging',
  'resizing',
  'style',
  'className',
  'zIndex',
  'hidden',
  'draggable',
  'selectable',
  'connectable',
  'deletable',
  'focusable',
  'sourcePosition',
  'targetPosition',
  'origin',
  'extent',
  'expandParent',
  'parentId',
  'type',
  'data',
]);

type Node = Flow['nodes'][number];

/**
 * Whether two JSON values are equal (key order aside), with an explicit stack: a stored flow may nest as
 * deep as anything that was ever accepted (thousands of levels before the gateway bounded depth), and a
 * recursive comparison (`util.isDeepStrictEqual`) overflows the stack on it.
 */
export function jsonEqual(x: unknown, y: unknown): boolean {
  const pending: [unknown, unknown][] = [[x, y]];
  for (let pair = pending.pop(); pair; pair = pending.pop()) {
    const [a, b] = pair;
    if (a === b) continue;
    if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
    if (Array.isArray(a)) {
      if (!Array.isArray(b) || a.length !== b.length) return false;
      for (let i = 0; i < a.length; i++) pending.push([a[i], b[i]]);
      continue;
    }
    if (Array.isArray(b)) return false;
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    for (const k of ka) {
      if (!Object.hasOwn(b, k)) return false;
      pending.push([(a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]]);
    }
  }
  return true;
}

function fieldChanges(before: Node, after: Node, canvas: boolean): FieldChange[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return names
    .filter((n) => n !== 'id' && CANVAS_FIELDS.has(n) === canvas)
    .filter((n) => !jsonEqual(before[n], after[n]))
    .map((name) => ({
      name,
      ...(name in before ? { before: before[name] } : {}),
      ...(name in after ? { after: after[name] } : {}),
    }));
}

const edgeRef = (e: Flow['edges'][number]): EdgeRef => ({
  source: e.source,
  sourceHandle: e.sourceHandle ?? null,
  target: e.target,
  targetHandle: e.targetHandle ?? null,
});
const edgeKey = (e: EdgeRef) => JSON.stringify([e.source, e.sourceHandle, e.target, e.targetHandle]);

/**
 * What changed from flow `a` to flow `b`: nodes by id (added, removed, and for those in both every param
 * before and after), edges by their ends. Canvas-only fields are left out unless `canvas`, then reported
 * per node apart from the params.
 */
export function diffFlows(
  agentId: string,
  from: number,
  to: number,
  a: Flow,
  b: Flow,
  canvas: boolean,
): VersionDiff {
  const before = new Map(a.nodes.map((n) => [n.id, n]));
  const after = new Map(b.nodes.map((n) => [n.id, n]));
  const changed: NodeChange[] = [];
  const moved: NodeChange[] = [];
  for (const [id, n] of after) {
    const old = before.get(id);
    if (!old) continue;
    const params = fieldChanges(old, n, false);
    if (params.length > 0) changed.push({ id, fields: params });
    if (canvas) {
      const drawn = fieldChanges(old, n, true);
      if (drawn.length > 0) moved.push({ id, fields: drawn });
    }
  }
  const edgesA = new Map(a.edges.map((e) => [edgeKey(edgeRef(e)), edgeRef(e)]));
  const edgesB = new Map(b.edges.map((e) => [edgeKey(edgeRef(e)), edgeRef(e)]));
  return {
    agentId,
    from,
    to,
    nodes: {
      added: [...after.keys()].filter((id) => !before.has(id)),
      removed: [...before.keys()].filter((id) => !after.has(id)),
      changed,
    },
    edges: {
      added: [...edgesB].filter(([k]) => !edgesA.has(k)).map(([, e]) => e),
      removed: [...edgesA].filter(([k]) => !edgesB.has(k)).map(([, e]) => e),
    },
    canvas: moved,
    // the latency change is the sessions service's to tell: the handler adds it
    latency: [],
  };
}
