// @ts-check
// The flow drawing: layout, boxes, edges and their labels, the current step, validate's issues at their nodes.

import { $, clip, svg } from '../ui/dom.js';
import { store } from './store.js';

/** The drawn boxes by node id; the current step and those passed, kept by id across redraws. */
let nodes = new Map();
/** @type {string | null} */
let step = null;
let visited = new Set();

export function mount() {
  store.on('flow', (flow) => drawFlow(flow));
  // a step said again (a turn's answer) is the current one still, not one passed
  store.on('step', (stepId) => stepId !== step && setStep(stepId));
  store.on('event', (ev) => {
    if (ev.type === 'step_entered') setStep(ev.stepId);
  });
  store.on('reset', () => {
    step = null;
    visited = new Set();
  });
  new ResizeObserver(() => store.flow !== undefined && drawFlow(store.flow)).observe($('flow').parentElement);
  drawFlow(null);
}

// ---- flow ----------------------------------------------------------------------------------------

export const BOX_W = 140;
export const BOX_H = 38;
export const GAP_X = 14;
export const GAP_Y = 16;

/**
 * For nodes without a position: rows by distance from the flow's entry, top to bottom, each row centred.
 * A node that only feeds another's settings (an llm, tts or stt into the agent's `*_in`) sits beside it.
 */
export function autoLayout(nodes, edges) {
  const ids = new Set(nodes.map((n) => n.id));
  const inner = edges.filter((e) => ids.has(e.source) && ids.has(e.target) && e.source !== e.target);
  const feeds = new Map();
  for (const n of nodes) {
    const out = inner.filter((e) => e.source === n.id);
    const isFeed = out.length > 0 && out.every((e) => /_in$/.test(e.targetHandle ?? ''));
    if (isFeed && !inner.some((e) => e.target === n.id)) feeds.set(n.id, out[0].target);
  }
  const steps = inner.filter((e) => !feeds.has(e.source));
  const incoming = new Set(steps.map((e) => e.target));
  const depth = new Map();
  const queue = nodes.filter((n) => !feeds.has(n.id) && !incoming.has(n.id)).map((n) => n.id);
  for (const id of queue) depth.set(id, 0);
  while (queue.length > 0) {
    const id = queue.shift();
    for (const e of steps) {
      if (e.source !== id || depth.has(e.target)) continue;
      depth.set(e.target, depth.get(id) + 1);
      queue.push(e.target);
    }
  }
  const rows = new Map();
  for (const n of nodes) {
    const d = (feeds.has(n.id) ? depth.get(feeds.get(n.id)) : depth.get(n.id)) ?? 0;
    rows.set(d, [...(rows.get(d) ?? []), n.id]);
  }
  // the steps in the middle of their row, what feeds them on either side
  for (const [d, row] of rows) {
    const side = row.filter((id) => feeds.has(id));
    const half = Math.ceil(side.length / 2);
    rows.set(d, [...side.slice(0, half), ...row.filter((id) => !feeds.has(id)), ...side.slice(half)]);
  }
  const at = new Map();
  for (const [d, row] of rows) {
    row.forEach((id, i) => {
      at.set(id, { x: (i - (row.length - 1) / 2) * (BOX_W + GAP_X), y: d * (BOX_H + GAP_Y) });
    });
  }
  return at;
}

export const hasPosition = (n) =>
  n.position && Number.isFinite(n.position.x) && Number.isFinite(n.position.y);

export function layout(flow) {
  const auto = autoLayout(flow.nodes, flow.edges);
  const placed = flow.nodes.filter(hasPosition);
  const at = new Map(placed.map((n) => [n.id, { x: n.position.x, y: n.position.y }]));
  // nodes without a position go under the ones the builder placed
  const below = placed.length > 0 ? Math.max(...placed.map((n) => n.position.y)) + BOX_H * 2 : 0;
  const left = placed.length > 0 ? Math.min(...placed.map((n) => n.position.x)) : 0;
  for (const n of flow.nodes) {
    if (!at.has(n.id)) at.set(n.id, { x: left + auto.get(n.id).x, y: below + auto.get(n.id).y });
  }
  return at;
}

/** Where the line from a box's centre towards (dx, dy) leaves the box. */
export function border(c, dx, dy) {
  const t = Math.min(dx ? BOX_W / 2 / Math.abs(dx) : Infinity, dy ? BOX_H / 2 / Math.abs(dy) : Infinity);
  return { x: c.x + dx * t, y: c.y + dy * t };
}

/** A branch's exit as the builder named it: `true`/`false`, or the category (the event carries its index). */
export function exitLabel(stepId, exit) {
  const node = store.flow?.nodes.find((n) => n.id === stepId);
  const i = Number(exit);
  if (!node || !Number.isInteger(i)) return String(exit);
  if (node.nodeType === 'ifelse') return ['true', 'false'][i] ?? String(exit);
  if (node.nodeType === 'categorize' && Array.isArray(node.categories))
    return node.categories[i] ?? String(exit);
  return String(exit);
}

/** The label of an edge that leaves a branch by one of its exits; none for any other edge. */
export function edgeLabel(flow, e) {
  const handle = e.sourceHandle ?? '';
  if (handle === 'true' || handle === 'false') return handle;
  const cat = /^cat_(\d+)$/.exec(handle);
  if (!cat) return '';
  const node = flow.nodes.find((n) => n.id === e.source);
  return (Array.isArray(node?.categories) && node.categories[Number(cat[1])]) || handle;
}

export const PAD = 14;

/**
 * The flow at the panel's own pixel size: the builder's positions are scaled to fit (down to 40 %), but the
 * boxes and their labels never are, so they read the same at any scale; a flow that still does not fit
 * scrolls. Edges between the same two nodes (a loop back, two exits to one step) bend apart, each with its
 * own arrow; a branch's exits carry their label.
 */
function drawFlow(flow) {
  const root = $('flow');
  const wrap = root.parentElement;
  root.replaceChildren();
  nodes = new Map();
  const availW = Math.max(wrap.clientWidth, 200);
  const availH = Math.max(wrap.clientHeight, 150);
  if (!flow || flow.nodes.length === 0) {
    sizeFlow(root, availW, availH);
    root.append(svg('text', { x: 10, y: 30, class: 'empty' }, 'No flow to draw.'));
    return;
  }
  const raw = layout(flow);
  const xs = [...raw.values()].map((p) => p.x);
  const ys = [...raw.values()].map((p) => p.y);
  const [minX, minY] = [Math.min(...xs), Math.min(...ys)];
  const [spanX, spanY] = [Math.max(...xs) - minX, Math.max(...ys) - minY];
  const placed = flow.nodes.some(hasPosition);
  const fit = Math.min(
    spanX > 0 ? (availW - BOX_W - 2 * PAD) / spanX : 1,
    spanY > 0 ? (availH - BOX_H - 2 * PAD) / spanY : 1,
  );
  const scale = placed ? Math.min(1, Math.max(0.4, fit)) : 1;
  const W = Math.max(availW, spanX * scale + BOX_W + 2 * PAD);
  const H = Math.max(availH, spanY * scale + BOX_H + 2 * PAD);
  const offX = (W - (spanX * scale + BOX_W)) / 2;
  const offY = Math.min(PAD * 2, (H - (spanY * scale + BOX_H)) / 2);
  const at = new Map(
    [...raw].map(([id, p]) => [id, { x: offX + (p.x - minX) * scale, y: offY + (p.y - minY) * scale }]),
  );
  sizeFlow(root, W, H);
  root.append(
    svg(
      'defs',
      {},
      svg(
        'marker',
        {
          id: 'arrow',
          viewBox: '0 0 10 10',
          refX: 9,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: 'auto',
        },
        svg('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }),
      ),
    ),
  );
  drawEdges(root, flow, at);
  for (const n of flow.nodes) drawNode(root, n, at.get(n.id));
  for (const id of visited) nodes.get(id)?.classList.add('visited');
  if (step) mark(step);
}

export function sizeFlow(root, w, h) {
  root.setAttribute('viewBox', `0 0 ${w} ${h}`);
  root.style.width = `${w}px`;
  root.style.height = `${h}px`;
}

export function drawEdges(root, flow, at) {
  const centre = (id) => ({ x: at.get(id).x + BOX_W / 2, y: at.get(id).y + BOX_H / 2 });
  const edges = flow.edges.filter((e) => at.has(e.source) && at.has(e.target) && e.source !== e.target);
  const pairOf = (e) => [e.source, e.target].sort().join('\u0000');
  const pairs = new Map();
  for (const e of edges) pairs.set(pairOf(e), [...(pairs.get(pairOf(e)) ?? []), e]);
  for (const e of edges) {
    const group = pairs.get(pairOf(e));
    const k = group.indexOf(e);
    // bent apart around the straight line, measured in the pair's own direction so opposite edges separate
    const bend = group.length > 1 ? (k - (group.length - 1) / 2) * 36 : 0;
    const [lo, hi] = e.source < e.target ? [e.source, e.target] : [e.target, e.source];
    const [cl, ch] = [centre(lo), centre(hi)];
    const len = Math.hypot(ch.x - cl.x, ch.y - cl.y) || 1;
    const normal = { x: -(ch.y - cl.y) / len, y: (ch.x - cl.x) / len };
    const a = centre(e.source);
    const b = centre(e.target);
    const mid = { x: (a.x + b.x) / 2 + normal.x * bend, y: (a.y + b.y) / 2 + normal.y * bend };
    const from = border(a, mid.x - a.x, mid.y - a.y);
    const to = border(b, mid.x - b.x, mid.y - b.y);
    const ctrl = { x: 2 * mid.x - (from.x + to.x) / 2, y: 2 * mid.y - (from.y + to.y) / 2 };
    const d =
      bend === 0
        ? `M${from.x},${from.y} L${to.x},${to.y}`
        : `M${from.x},${from.y} Q${ctrl.x},${ctrl.y} ${to.x},${to.y}`;
    const path = svg('path', {
      class: 'edge',
      d,
      'data-source': e.source,
      'data-target': e.target,
      'data-handle': e.sourceHandle ?? '',
      'marker-end': 'url(#arrow)',
    });
    path.append(svg('title', {}, `${e.source} (${e.sourceHandle ?? 'output'}) → ${e.target}`));
    root.append(path);
    const label = edgeLabel(flow, e);
    if (label) {
      const at = bend === 0 ? { x: (from.x + to.x) / 2, y: (from.y + to.y) / 2 } : mid;
      root.append(
        svg('text', { class: 'edge-label', x: at.x, y: at.y + 4, 'text-anchor': 'middle' }, clip(label, 18)),
      );
    }
  }
}

export function drawNode(root, n, p) {
  const name = typeof n.name === 'string' && n.name ? n.name : n.id;
  const problems = store.issues.get(n.id) ?? [];
  const g = svg(
    'g',
    {
      class: `node${problems.length ? ' issue' : ''}`,
      'data-node-id': n.id,
      transform: `translate(${p.x} ${p.y})`,
    },
    svg('title', {}, [`${n.id} (${n.nodeType})`, ...problems].join('\n')),
    svg('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
    svg('text', { x: 8, y: 17, class: 'name' }, clip(name, 15)),
    svg('text', { x: 8, y: 31, class: 'type' }, String(n.nodeType ?? '')),
  );
  if (problems.length) g.append(svg('text', { x: BOX_W - 14, y: 17, class: 'mark' }, '!'));
  nodes.set(n.id, g);
  root.append(g);
}

/**
 * The current step; the one before it is passed. Kept by id: a step may come before its flow is drawn (a
 * replay's events and its version's flow arrive in either order), and a redraw (a resize) keeps both.
 */
function setStep(stepId) {
  const previous = nodes.get(step);
  previous?.classList.remove('current');
  previous?.removeAttribute('aria-current');
  if (step) {
    visited.add(step);
    previous?.classList.add('visited');
  }
  step = stepId;
  mark(stepId);
}

function mark(stepId) {
  const node = nodes.get(stepId);
  node?.classList.add('current');
  node?.setAttribute('aria-current', 'step');
  $('step').textContent = stepId ? `current step: ${stepId}` : '';
}
