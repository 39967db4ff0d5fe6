import type { EdgeRef, FieldChange, Flow, NodeChange, VersionDiff } from '@vab/contracts';
import { isDeepStrictEqual } from 'node:util';

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

function fieldChanges(before: Node, after: Node, canvas: boolean): FieldChange[] {
  const names = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return names
    .filter((n) => n !== 'id' && CANVAS_FIELDS.has(n) === canvas)
    .filter((n) => !isDeepStrictEqual(before[n], after[n]))
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
