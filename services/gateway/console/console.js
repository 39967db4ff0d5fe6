// The agent console: run an agent's text session and watch its events (docs/api.md, "The console").
// Plain browser JavaScript, no dependencies: everything it shows comes from this origin's /api.

const $ = (id) => document.getElementById(id);
const SVG_NS = 'http://www.w3.org/2000/svg';
const TOKEN_KEY = 'vab-console-token';
const EVENT_TYPES = [
  'session_started',
  'session_ended',
  'step_entered',
  'user_turn',
  'agent_reply_delta',
  'agent_reply',
  'tool_called',
  'tool_result',
  'branch_decided',
  'transfer',
  'post_processing',
  'turn_metrics',
  'usage',
];
/** The figures the chart draws, in the order of METRIC_NAMES (packages/contracts/src/metrics.ts). */
const CHART_FIGURES = [
  ['e2eLatencyMs', 'End-to-end (voice)'],
  ['llmTtftMs', 'LLM first token'],
  ['turnMs', 'Whole turn'],
];
const CHART_TURNS = 30;
const STREAM_RETRIES = 5;

const state = {
  /** Bumped whenever the view changes: answers of an older view are dropped. */
  gen: 0,
  agentId: '',
  agent: null,
  /** { agentId, sessionId, live, ended } of the session shown. */
  session: null,
  stream: null,
  turnAbort: null,
  seen: new Set(),
  lastId: 0,
  replies: new Map(),
  interim: null,
  turns: [],
  step: null,
  nodes: new Map(),
  /** The flow drawn, and the validate issues on its nodes (node id → messages). */
  flow: null,
  issues: new Map(),
  /** Test-run attempts by their session id: { name, verdict } (the past sessions list names them). */
  attempts: new Map(),
};

/**
 * The provider keys box is kept in sessionStorage: a reload (or a crash of the page) keeps it, but it lives
 * only as long as this tab, is never shared with other tabs and is not left on disk the way localStorage
 * would leave a secret indefinitely.
 */
const KEYS_KEY = 'vab-console-keys';
const stored = {
  get: (k) => {
    try {
      return sessionStorage.getItem(k) ?? '';
    } catch {
      return '';
    }
  },
  set: (k, v) => {
    try {
      sessionStorage.setItem(k, v);
    } catch {
      // storage off: the box still works, it is just not kept
    }
  },
};

// ---- API -----------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const enc = encodeURIComponent;
const agentPath = (agentId) => `/api/agents/${enc(agentId)}`;
const sessionPath = (agentId, sessionId) => `${agentPath(agentId)}/test-sessions/${enc(sessionId)}`;

let tokenAsked = null;

/** Shows the token form (once for every call waiting on it); resolves when a token was entered. */
function askToken(rejected) {
  if (tokenAsked) return tokenAsked;
  const dialog = $('auth');
  const form = $('auth-form');
  const input = $('token');
  input.value = '';
  $('auth-error').hidden = !rejected;
  tokenAsked = new Promise((resolve) => {
    form.onsubmit = (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      form.onsubmit = null;
      dialog.close();
      tokenAsked = null;
      resolve();
    };
  });
  dialog.showModal();
  return tokenAsked;
}

/** One call to this origin's API with the token when there is one; a 401 asks for a token and retries. */
async function call(method, path, body, init = {}) {
  for (;;) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    const headers = { ...(init.headers ?? {}) };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: init.signal,
    });
    if (res.status !== 401) return res;
    await res.body?.cancel();
    await askToken(token !== null);
  }
}

async function errorOf(res) {
  const text = await res.text();
  try {
    const e = JSON.parse(text);
    return new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? text);
  } catch {
    return new ApiError(res.status, `HTTP_${res.status}`, text || res.statusText);
  }
}

async function json(method, path, body) {
  const res = await call(method, path, body);
  if (!res.ok) throw await errorOf(res);
  return res.status === 204 ? undefined : res.json();
}

/**
 * An EventSource cannot send a token: with tokens on (the API asked us for one) the stream is opened with a
 * single-use ticket. A gateway without the ticket route (404) takes the stream as it is.
 */
async function ticketFor(path) {
  if (!sessionStorage.getItem(TOKEN_KEY)) return null;
  const res = await call('POST', '/api/tickets', { path });
  if (res.status === 404) return null;
  if (!res.ok) throw await errorOf(res);
  return (await res.json()).ticket;
}

/** Server-sent events from a fetch() body (a POST cannot be an EventSource): { event, id, data } each. */
async function* sseMessages(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let msg = { event: 'message', id: undefined, data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    const lines = buffer.split(/\r\n|\r|\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === '') {
        if (msg.data.length > 0) yield { event: msg.event, id: msg.id, data: msg.data.join('\n') };
        msg = { event: 'message', id: undefined, data: [] };
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') msg.event = value;
      else if (field === 'data') msg.data.push(value);
      else if (field === 'id') msg.id = value;
    }
  }
}

// ---- status and helpers --------------------------------------------------------------------------

function setStatus(text, error = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

function showError(err, what) {
  if (err?.name === 'AbortError') return;
  const detail = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err?.message ?? err);
  setStatus(`${what} failed — ${detail}`, true);
}

const ms = (v) => (v === undefined ? '–' : `${Math.round(v)} ms`);
const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const short = (v) => clip(typeof v === 'string' ? v : JSON.stringify(v), 160);
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
const time = (at) => new Date(at).toLocaleTimeString();

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  node.append(...children);
  return node;
}

// ---- conversation --------------------------------------------------------------------------------

function append(item) {
  const log = $('log');
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(item);
  if (atBottom) log.scrollTop = log.scrollHeight;
  return item;
}

/** A line for what happened between the messages: a step, a tool call, a branch, a transfer… */
function note(kind, label, text) {
  return append(el('li', { class: `event ${kind}` }, el('strong', {}, label), ` ${text}`));
}

function userBubble(text, pending = false) {
  const li = el('li', { class: 'user' }, text);
  if (pending) li.dataset.pending = 'true';
  return append(li);
}

function replyBubble(replyId) {
  let li = state.replies.get(replyId);
  if (!li) {
    li = append(el('li', { class: 'agent', 'data-reply-id': replyId }));
    state.replies.set(replyId, li);
  }
  return li;
}

function onUserTurn(ev) {
  if (!ev.final) {
    state.interim ??= append(el('li', { class: 'user interim' }));
    state.interim.textContent = ev.text;
    return;
  }
  state.interim?.remove();
  state.interim = null;
  // what this page sent is already shown: the event confirms it
  const pending = [...$('log').querySelectorAll('li.user[data-pending]')].find(
    (li) => li.textContent === ev.text,
  );
  if (pending) delete pending.dataset.pending;
  else userBubble(ev.text);
}

function onTool(ev) {
  if (ev.type === 'tool_called') {
    note('tool', `Tool ${ev.name}`, `called (${ev.source}) with ${short(ev.arguments)}`);
    return;
  }
  if (ev.error !== undefined)
    note('tool bad', `Tool ${ev.name}`, `failed after ${ms(ev.durationMs)}: ${short(ev.error)}`);
  else note('tool', `Tool ${ev.name}`, `answered in ${ms(ev.durationMs)}: ${short(ev.result ?? '')}`);
}

function onPostProcessing(ev) {
  if (ev.kind === 'structured_output') {
    if (ev.ok) note('ok', 'Structured output', short(ev.output ?? {}));
    else note('bad', 'Structured output', `failed: ${ev.error ?? 'no output'}`);
    return;
  }
  const status = ev.status === undefined ? '' : ` (HTTP ${ev.status})`;
  if (ev.ok) note('ok', 'Webhook', `delivered${status}`);
  else note('bad', 'Webhook', `failed${status}${ev.error ? `: ${ev.error}` : ''}`);
}

function onUsage(ev) {
  const parts = ev.usage.map((u) => {
    if (u.kind === 'llm')
      return `${u.model}: ${u.promptTokens ?? 0} in / ${u.completionTokens ?? 0} out tokens`;
    if (u.kind === 'tts') return `${u.model}: ${u.ttsCharacters ?? 0} characters`;
    return `${u.model}: ${u.sttAudioSeconds ?? 0} s of audio`;
  });
  $('usage').textContent = parts.length ? `Usage: ${parts.join(' · ')}` : '';
}

const handlers = {
  session_started: (ev) =>
    note('info', 'Session started', `${ev.sessionType}, ${ev.version ? `version ${ev.version}` : 'draft'}`),
  session_ended: (ev) => {
    note('info', 'Session ended', `(${ev.reason}) after ${(ev.durationMs / 1000).toFixed(1)} s`);
    sessionEnded();
  },
  step_entered: (ev) => {
    setStep(ev.stepId);
    note('step', 'Step', `${ev.stepId} (${ev.stepType})`);
  },
  user_turn: onUserTurn,
  agent_reply_delta: (ev) => {
    const li = replyBubble(ev.replyId);
    li.classList.add('streaming');
    li.textContent += ev.delta;
  },
  agent_reply: (ev) => {
    const li = replyBubble(ev.replyId);
    li.classList.remove('streaming');
    li.textContent = ev.text;
    if (state.turnSeen) state.turnSeen.replies++;
  },
  tool_called: onTool,
  tool_result: onTool,
  branch_decided: (ev) =>
    note(
      'branch',
      'Branch',
      `${ev.stepId} → ${exitLabel(ev.stepId, ev.exit)}${ev.attempt > 1 ? ` (attempt ${ev.attempt})` : ''}`,
    ),
  transfer: (ev) =>
    ev.ok
      ? note('ok', 'Transfer', `to agent ${ev.targetAgentId}`)
      : note('bad', 'Transfer', `to agent ${ev.targetAgentId} failed (${ev.reason ?? 'error'})`),
  post_processing: onPostProcessing,
  turn_metrics: (ev) => {
    addTurn(ev.metrics);
    if (state.turnSeen) state.turnSeen.metrics = true;
  },
  usage: onUsage,
  error: (ev) => note('bad', `Error ${ev.code}`, ev.message),
};

/** One session event, from whichever stream brought it first (ids are per session: each is shown once). */
function handleEvent(ev) {
  if (typeof ev.id === 'number') {
    if (state.seen.has(ev.id)) return;
    state.seen.add(ev.id);
    state.lastId = Math.max(state.lastId, ev.id);
  }
  handlers[ev.type]?.(ev);
}

function sessionEnded() {
  if (!state.session) return;
  state.session.ended = true;
  $('turn').disabled = true;
  $('send').disabled = true;
  $('end').disabled = true;
}

// ---- flow ----------------------------------------------------------------------------------------

const BOX_W = 140;
const BOX_H = 38;
const GAP_X = 14;
const GAP_Y = 16;

/**
 * For nodes without a position: rows by distance from the flow's entry, top to bottom, each row centred.
 * A node that only feeds another's settings (an llm, tts or stt into the agent's `*_in`) sits beside it.
 */
function autoLayout(nodes, edges) {
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

const hasPosition = (n) => n.position && Number.isFinite(n.position.x) && Number.isFinite(n.position.y);

function layout(flow) {
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
function border(c, dx, dy) {
  const t = Math.min(dx ? BOX_W / 2 / Math.abs(dx) : Infinity, dy ? BOX_H / 2 / Math.abs(dy) : Infinity);
  return { x: c.x + dx * t, y: c.y + dy * t };
}

/** A branch's exit as the builder named it: `true`/`false`, or the category (the event carries its index). */
function exitLabel(stepId, exit) {
  const node = state.flow?.nodes.find((n) => n.id === stepId);
  const i = Number(exit);
  if (!node || !Number.isInteger(i)) return String(exit);
  if (node.nodeType === 'ifelse') return ['true', 'false'][i] ?? String(exit);
  if (node.nodeType === 'categorize' && Array.isArray(node.categories))
    return node.categories[i] ?? String(exit);
  return String(exit);
}

/** The label of an edge that leaves a branch by one of its exits; none for any other edge. */
function edgeLabel(flow, e) {
  const handle = e.sourceHandle ?? '';
  if (handle === 'true' || handle === 'false') return handle;
  const cat = /^cat_(\d+)$/.exec(handle);
  if (!cat) return '';
  const node = flow.nodes.find((n) => n.id === e.source);
  return (Array.isArray(node?.categories) && node.categories[Number(cat[1])]) || handle;
}

const PAD = 14;

/**
 * The flow at the panel's own pixel size: the builder's positions are scaled to fit (down to 40 %), but the
 * boxes and their labels never are, so they read the same at any scale; a flow that still does not fit
 * scrolls. Edges between the same two nodes (a loop back, two exits to one step) bend apart, each with its
 * own arrow; a branch's exits carry their label.
 */
function drawFlow(flow) {
  state.flow = flow;
  const root = $('flow');
  const wrap = root.parentElement;
  root.replaceChildren();
  state.nodes = new Map();
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
  if (state.step) setStep(state.step);
}

function sizeFlow(root, w, h) {
  root.setAttribute('viewBox', `0 0 ${w} ${h}`);
  root.style.width = `${w}px`;
  root.style.height = `${h}px`;
}

function drawEdges(root, flow, at) {
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

function drawNode(root, n, p) {
  const name = typeof n.name === 'string' && n.name ? n.name : n.id;
  const problems = state.issues.get(n.id) ?? [];
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
  state.nodes.set(n.id, g);
  root.append(g);
}

function setStep(stepId) {
  const previous = state.nodes.get(state.step);
  previous?.classList.remove('current');
  previous?.classList.add('visited');
  state.step = stepId;
  const node = state.nodes.get(stepId);
  node?.classList.add('current');
  node?.setAttribute('aria-current', 'step');
  previous?.removeAttribute('aria-current');
  $('step').textContent = stepId ? `current step: ${stepId}` : '';
}

// ---- latency chart -------------------------------------------------------------------------------

/** A turn that called no model (a literal greeting) has no latency of the agent's: not charted. */
const calledModel = (m) =>
  m.llmTtftMs !== undefined || m.llmDurationMs !== undefined || m.e2eLatencyMs !== undefined;

function addTurn(metrics) {
  if (!calledModel(metrics)) return;
  state.turns.push(metrics);
  drawChart();
}

function niceMax(v) {
  if (v <= 0) return 100;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function drawChart() {
  const root = $('chart');
  root.replaceChildren();
  const { width, height } = root.getBoundingClientRect();
  const W = Math.max(width, 200);
  const H = Math.max(height, 100);
  root.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const turns = state.turns.slice(-CHART_TURNS);
  const first = state.turns.length - turns.length;
  const figures = CHART_FIGURES.filter(([k]) => turns.some((t) => t[k] !== undefined));
  $('legend').replaceChildren(...figures.map(([k, label]) => el('span', {}, el('i', { class: k }), label)));
  if (figures.length === 0) {
    root.append(svg('text', { x: 8, y: 20, class: 'empty' }, 'No turn figures yet.'));
    return;
  }
  const left = 44;
  const bottom = H - 18;
  const top = 8;
  // a floor, so a lone fast turn does not fill the axis
  const max = niceMax(Math.max(50, ...turns.flatMap((t) => figures.map(([k]) => t[k] ?? 0))));
  const y = (v) => bottom - ((bottom - top) * v) / max;
  for (const v of [0, max / 2, max]) {
    root.append(svg('line', { class: 'axis', x1: left, x2: W - 4, y1: y(v), y2: y(v) }));
    root.append(svg('text', { x: left - 4, y: y(v) + 3, 'text-anchor': 'end' }, String(Math.round(v))));
  }
  const slot = (W - left - 4) / Math.max(turns.length, 8);
  const barW = Math.max(2, Math.min(18, (slot - 6) / figures.length));
  turns.forEach((t, i) => {
    const x0 = left + i * slot + (slot - barW * figures.length) / 2;
    figures.forEach(([k, label], j) => {
      if (t[k] === undefined) return;
      const bar = svg('rect', {
        class: `bar bar-${k}`,
        'data-turn': first + i + 1,
        x: x0 + j * barW,
        y: y(t[k]),
        width: barW - 1,
        height: Math.max(1, bottom - y(t[k])),
      });
      bar.append(svg('title', {}, `Turn ${first + i + 1}: ${label} ${ms(t[k])}`));
      root.append(bar);
      // the figure itself over its bar, while the bars are wide enough to carry it
      if (barW >= 16) {
        const cx = x0 + j * barW + barW / 2;
        root.append(
          svg('text', { x: cx, y: y(t[k]) - 3, 'text-anchor': 'middle' }, String(Math.round(t[k]))),
        );
      }
    });
    root.append(
      svg(
        'text',
        { x: left + i * slot + slot / 2, y: H - 4, 'text-anchor': 'middle' },
        String(first + i + 1),
      ),
    );
  });
}

async function showStats(agentId, version, gen) {
  const path = version ? `${agentPath(agentId)}/versions/${version}/stats` : `${agentPath(agentId)}/stats`;
  try {
    const s = await json('GET', path);
    if (gen !== state.gen) return;
    const f = s.figures ?? {};
    const parts = CHART_FIGURES.filter(([k]) => f[k]).map(
      ([k, label]) => `${label} p50 ${ms(f[k].p50)} / p90 ${ms(f[k].p90)}`,
    );
    const scope = version ? `Version ${version}` : 'All versions';
    const counts = `${plural(s.sessions, 'session')}, ${plural(s.turns, 'turn')}`;
    $('stats').textContent = `${scope}: ${counts}${parts.length ? ` · ${parts.join(' · ')}` : ''}`;
  } catch {
    // the figures are a bonus: the session itself is what the page is for
    if (gen === state.gen) $('stats').textContent = '';
  }
}

// ---- the events stream ---------------------------------------------------------------------------

/**
 * Follows a session's events with an EventSource. A ticket is single use, so the browser's own reconnect
 * (same URL) cannot work with one: on a dropped connection the page opens a new stream itself, with a new
 * ticket, from the last event it has.
 */
async function follow(agentId, sessionId, gen, attempt = 0) {
  const path = `${sessionPath(agentId, sessionId)}/events`;
  const params = new URLSearchParams();
  try {
    const ticket = await ticketFor(path);
    if (ticket) params.set('ticket', ticket);
  } catch (err) {
    showError(err, 'Opening the events stream');
    return;
  }
  if (gen !== state.gen) return;
  if (state.lastId > 0) params.set('lastEventId', String(state.lastId));
  const query = params.toString();
  const es = new EventSource(query ? `${path}?${query}` : path);
  state.stream = es;
  let received = 0;
  const stop = () => {
    es.close();
    if (state.stream === es) state.stream = null;
  };
  for (const type of EVENT_TYPES) {
    es.addEventListener(type, (e) => {
      if (gen !== state.gen) return stop();
      received++;
      handleEvent(JSON.parse(e.data));
      if (type === 'session_ended') stop();
    });
  }
  es.addEventListener('open', () => {
    if (gen === state.gen) state.onStreamOpen?.();
  });
  es.addEventListener('error', (e) => {
    if (gen !== state.gen) return stop();
    if (e.data) {
      const ev = JSON.parse(e.data);
      // an event of the session (an error the model saw) has an id; the stream's own error has none
      if (typeof ev.id === 'number') return handleEvent(ev);
      stop();
      note('bad', `Stream ${ev.code}`, ev.message);
      return;
    }
    stop();
    if (state.session?.ended) return;
    void (async () => {
      // a closed session's stream ends without session_ended when it has no more events to give (a stream
      // that brought some may only have dropped: it is reopened first)
      if (received === 0 && (await closedSession(agentId, sessionId, gen))) return;
      if (gen !== state.gen) return;
      if (attempt + 1 >= STREAM_RETRIES || (received === 0 && attempt > 0)) {
        state.onStreamFailed?.();
        setStatus('The events stream is not available', true);
        return;
      }
      setTimeout(
        () => void follow(agentId, sessionId, gen, received > 0 ? 0 : attempt + 1),
        500 * (attempt + 1),
      );
    })();
  });
}

/**
 * Whether the session is closed (nothing more will come); one that has no events at all (recorded by a
 * client, or before events were kept) is shown from its transcript instead.
 */
async function closedSession(agentId, sessionId, gen) {
  try {
    const record = await json('GET', sessionPath(agentId, sessionId));
    if (gen !== state.gen || record.status !== 'closed') return gen !== state.gen;
    sessionEnded();
    if (state.seen.size > 0) return true;
    const messages = await json('GET', `${sessionPath(agentId, sessionId)}/messages`);
    if (gen !== state.gen) return true;
    note('info', 'Transcript', 'no events were recorded for this session');
    for (const m of messages) {
      if (m.role === 'user') userBubble(m.content);
      else append(el('li', { class: 'agent' }, m.content));
      if (m.metrics) addTurn(m.metrics);
    }
    const last = messages.at(-1);
    if (last) setStep(last.stepId);
    return true;
  } catch {
    return false;
  }
}

/** Which session the conversation is: its kind, id (shortened; whole in the tooltip) and version. */
function sessionInfo(kind, id, version) {
  const info = $('conv-info');
  info.textContent = `· ${kind} ${id.slice(0, 8)}… · ${version ? `version ${version}` : 'draft'}`;
  info.title = id;
}

// ---- views ---------------------------------------------------------------------------------------

function resetView() {
  state.gen++;
  state.stream?.close();
  state.stream = null;
  state.turnAbort?.abort();
  state.turnAbort = null;
  state.session = null;
  state.seen = new Set();
  state.lastId = 0;
  state.replies = new Map();
  state.interim = null;
  state.turns = [];
  state.step = null;
  state.onStreamOpen = null;
  state.onStreamFailed = null;
  state.turnSeen = null;
  $('log').replaceChildren();
  $('conv-info').textContent = '';
  $('conv-info').removeAttribute('title');
  $('stats').textContent = '';
  $('usage').textContent = '';
  $('turn').disabled = true;
  $('send').disabled = true;
  $('end').disabled = true;
  $('add-case').disabled = true;
  drawChart();
  for (const b of $('sessions').querySelectorAll('button')) b.removeAttribute('aria-current');
  return state.gen;
}

async function flowOf(agentId, version) {
  if (version) return (await json('GET', `${agentPath(agentId)}/versions/${version}`)).flow;
  return state.agent?.id === agentId ? state.agent.flow : (await json('GET', agentPath(agentId))).flow;
}

function keysOf() {
  const keys = {};
  for (const raw of $('keys').value.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`provider keys: "${clip(line, 20)}" is not provider=key`);
    keys[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return Object.keys(keys).length > 0 ? keys : undefined;
}

/** What the turn's answer says that no event showed (a backend that sent none, or a stream that failed). */
function applyResult(result, seen) {
  if (seen.replies === 0) for (const r of result.replies) append(el('li', { class: 'agent' }, r));
  if (!seen.metrics && result.metrics) addTurn(result.metrics);
  if (result.stepId && result.stepId !== state.step) setStep(result.stepId);
  if (result.ended) sessionEnded();
}

async function startSession() {
  const agentId = $('agent').value;
  const choice = $('version').value;
  if (!agentId) return;
  const gen = resetView();
  try {
    const body = {};
    if (choice === 'draft') body.flow = state.agent.flow;
    else if (choice !== 'latest') body.version = Number(choice);
    const apiKeys = keysOf();
    if (apiKeys) body.apiKeys = apiKeys;
    setStatus('Starting a text session…');
    const flow = await flowOf(agentId, body.version);
    if (gen !== state.gen) return;
    if (!(await readyToRun(flow, apiKeys))) return;
    if (gen !== state.gen) return;
    drawFlow(flow);
    const result = await json('POST', `${agentPath(agentId)}/text-sessions`, body);
    if (gen !== state.gen) return;
    const version = body.flow ? undefined : (body.version ?? state.agent?.version);
    state.session = { agentId, sessionId: result.sessionId, version, live: true, ended: false };
    $('add-case').disabled = false;
    sessionInfo('text', result.sessionId, version);
    setStep(result.stepId);
    $('end').disabled = false;
    const ready = () => {
      if (gen !== state.gen || state.session?.ended) return;
      $('turn').disabled = false;
      $('send').disabled = false;
      $('turn').focus();
    };
    // the greeting's events come through the stream; without one, the start's answer shows it
    state.onStreamOpen = ready;
    state.onStreamFailed = () => {
      if (state.seen.size === 0) applyResult(result, { replies: 0, metrics: false });
      ready();
    };
    if (result.ended) sessionEnded();
    setStatus(`Text session ${result.sessionId} started`);
    void follow(agentId, result.sessionId, gen);
    void showStats(agentId, version, gen);
    void loadSessions(agentId);
  } catch (err) {
    showError(err, 'Starting the session');
  }
}

async function sendTurn(text) {
  const s = state.session;
  if (!s?.live || s.ended) return;
  const gen = state.gen;
  const abort = new AbortController();
  state.turnAbort = abort;
  const seen = { replies: 0, metrics: false };
  state.turnSeen = seen;
  $('send').disabled = true;
  userBubble(text, true);
  try {
    const res = await call(
      'POST',
      `${agentPath(s.agentId)}/text-sessions/${enc(s.sessionId)}/turns`,
      { text },
      { headers: { accept: 'text/event-stream' }, signal: abort.signal },
    );
    if (!res.ok) throw await errorOf(res);
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      if (gen === state.gen) applyResult(await res.json(), seen);
      return;
    }
    for await (const msg of sseMessages(res.body)) {
      if (gen !== state.gen) return;
      const data = JSON.parse(msg.data);
      if (msg.event === 'result') applyResult(data, seen);
      else if (msg.event === 'error' && typeof data.id !== 'number')
        note('bad', `Error ${data.code}`, data.message);
      else handleEvent(data);
    }
    // the version's figures now count this turn
    void showStats(s.agentId, s.version, gen);
  } catch (err) {
    if (gen === state.gen) showError(err, 'The turn');
  } finally {
    if (gen === state.gen) {
      state.turnAbort = null;
      state.turnSeen = null;
      if (!state.session?.ended) $('send').disabled = false;
    }
  }
}

async function endSession() {
  const s = state.session;
  if (!s?.live || s.ended) return;
  $('end').disabled = true;
  try {
    await json('DELETE', `${agentPath(s.agentId)}/text-sessions/${enc(s.sessionId)}`);
    if (state.session === s) sessionEnded();
    setStatus(`Text session ${s.sessionId} ended`);
    void loadSessions(s.agentId);
  } catch (err) {
    showError(err, 'Ending the session');
    $('end').disabled = false;
  }
}

/** A past session: its flow (the version it ran), and every event it had, replayed by the events stream. */
async function openSession(s, button) {
  const gen = resetView();
  button.setAttribute('aria-current', 'true');
  state.session = { agentId: s.agentId, sessionId: s.id, live: false, ended: false };
  $('add-case').disabled = false;
  sessionInfo(s.sessionType, s.id, s.version);
  setStatus(`Replaying session ${s.id}`);
  try {
    const flow = await flowOf(s.agentId, s.version ?? undefined);
    if (gen !== state.gen) return;
    drawFlow(flow);
  } catch (err) {
    showError(err, 'Loading the flow');
  }
  void showStats(s.agentId, s.version ?? undefined, gen);
  void follow(s.agentId, s.id, gen);
}

// ---- building: templates, the flow editor, validate ----------------------------------------------

const edge = (source, target, sourceHandle = 'output', targetHandle = 'in') => ({
  source,
  sourceHandle,
  target,
  targetHandle,
});

/** Runnable starting points (docs/flow-reference.md has every node type and param). */
const TEMPLATES = {
  greeter: () => ({
    nodes: [
      {
        id: 'agent',
        nodeType: 'agent',
        name: 'Assistant',
        instructions: 'Be brief and kind.',
        language: 'en',
      },
      { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini' },
      { id: 'tts', nodeType: 'tts', provider: 'elevenlabs' },
      { id: 'stt', nodeType: 'stt', provider: 'deepgram' },
      { id: 'start', nodeType: 'start', command: 'Hello! How can I help?', isLiteral: true },
      { id: 'burst', nodeType: 'burst', command: 'Help with the question.', rounds: 1 },
      { id: 'end', nodeType: 'end', command: 'Thank you, goodbye!', isLiteral: true },
    ],
    edges: [
      edge('llm', 'agent', 'output', 'llm_in'),
      edge('tts', 'agent', 'output', 'tts_in'),
      edge('stt', 'agent', 'output', 'stt_in'),
      edge('agent', 'start'),
      edge('start', 'burst'),
      edge('burst', 'end'),
    ],
  }),
  branch: () => {
    const f = TEMPLATES.greeter();
    f.nodes.push({ id: 'check', nodeType: 'ifelse', conditionText: 'The question has been answered.' });
    f.edges = f.edges.filter((e) => e.source !== 'burst');
    f.edges.push(edge('burst', 'check'), edge('check', 'end', 'true'), edge('check', 'burst', 'false'));
    return f;
  },
};

/** A flow from pasted JSON: a flow, or an agent holding one. */
function parseFlow(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new Error(`the flow is not JSON (${err.message})`);
  }
  const flow = v && typeof v === 'object' && v.flow ? v.flow : v;
  if (!flow || !Array.isArray(flow.nodes) || !Array.isArray(flow.edges)) {
    throw new Error('the flow needs `nodes` and `edges` lists');
  }
  return flow;
}

async function createAgent() {
  try {
    const choice = $('template').value;
    const flow = choice === 'json' ? parseFlow($('new-json').value) : TEMPLATES[choice]();
    const name = $('new-name').value.trim() || 'New agent';
    const agent = await json('POST', '/api/agents', { name, flow });
    await loadAgents();
    $('agent').value = agent.id;
    resetView();
    await pickAgent(agent.id);
    $('new-agent').open = false;
    $('editor').open = true;
    setStatus(`Agent ${name} created`);
  } catch (err) {
    showError(err, 'Creating the agent');
  }
}

/** Validate's issues: listed, each at its node (or edge), and marked on the drawing. */
function showIssues(issues) {
  state.issues = new Map();
  for (const i of issues) {
    if (i.nodeId) state.issues.set(i.nodeId, [...(state.issues.get(i.nodeId) ?? []), i.message]);
  }
  $('issues').replaceChildren(
    ...issues.map((i) => {
      const where = i.nodeId ?? (i.edgeIndex !== undefined ? `edge ${i.edgeIndex + 1}` : 'flow');
      return el(
        'li',
        { class: 'issue', 'data-node-id': i.nodeId ?? '', 'data-code': i.code },
        el('strong', {}, where),
        ` ${i.message} `,
        el('span', { class: 'muted' }, i.code),
      );
    }),
  );
}

async function validateFlow(flow) {
  return json('POST', '/api/flows/validate', { ...flow, sessionType: 'text' });
}

async function validateEditor() {
  try {
    const flow = parseFlow($('flow-json').value);
    const v = await validateFlow(flow);
    showIssues(v.issues);
    if (v.issues.length === 0) {
      $('issues').replaceChildren(el('li', { class: 'ok' }, 'No issues: the flow can run.'));
    }
    if (!state.session) drawFlow(flow);
    return v;
  } catch (err) {
    showError(err, 'Validating');
    return undefined;
  }
}

async function saveEditor() {
  if (!state.agentId) return;
  try {
    const flow = parseFlow($('flow-json').value);
    const agent = await json('PATCH', agentPath(state.agentId), { flow });
    setStatus(`Saved as version ${agent.version}`);
    resetView();
    await pickAgent(state.agentId);
  } catch (err) {
    showError(err, 'Saving the flow');
  }
}

/**
 * Before a start: validate's issues, and the keys the flow needs that the box does not hold, asked for
 * here rather than by a failed start.
 */
async function readyToRun(flow, apiKeys) {
  const v = await validateFlow(flow);
  showIssues(v.issues);
  if (v.issues.length > 0) {
    drawFlow(flow);
    $('editor').open = true;
    setStatus(`The flow cannot run: ${plural(v.issues.length, 'issue')} (see Edit the flow)`, true);
    return false;
  }
  const missing = v.requirements.filter((r) => r.key === 'request' && !apiKeys?.[r.provider]);
  if (missing.length === 0) return true;
  const names = missing.map((r) => r.provider);
  $('needs').textContent =
    `This flow needs a key for ${names.join(', ')} (the server has none it may use there): ` +
    `add ${names.map((n) => `${n}=…`).join(', ')} to the provider keys.`;
  $('needs').hidden = false;
  $('keys-box').open = true;
  $('keys').focus();
  setStatus(`A key is needed for ${names.join(', ')}`, true);
  return false;
}

// ---- tests: cases, runs, attempts ----------------------------------------------------------------

const RUN_POLL_MS = 500;
const pct = (r) => (r === null || r === undefined ? '–' : `${Math.round(r * 100)} %`);

function rememberAttempts(runs) {
  for (const run of runs) {
    for (const c of run.cases ?? []) {
      for (const r of c.repeats ?? []) {
        const id = r.observed?.sessionId;
        if (id && !state.attempts.has(id)) state.attempts.set(id, { name: c.name, verdict: r.verdict });
      }
    }
  }
}

async function loadTests(agentId) {
  try {
    const [cases, runs] = await Promise.all([
      json('GET', `${agentPath(agentId)}/test-cases`),
      json('GET', `${agentPath(agentId)}/test-runs`),
    ]);
    if (agentId !== state.agentId) return;
    rememberAttempts(runs);
    $('cases').replaceChildren(
      ...cases.map((c) =>
        el(
          'li',
          { 'data-case-id': c.id },
          c.name,
          el('span', { class: 'muted' }, ` · ${c.simulation ? 'simulated' : plural(c.turns.length, 'turn')}`),
        ),
      ),
    );
    if (cases.length === 0) $('cases').replaceChildren(el('li', { class: 'muted' }, 'No test cases yet.'));
    if (runs[0]) renderRun(runs[0]);
  } catch (err) {
    showError(err, 'Loading the tests');
  }
}

function renderRun(run) {
  const c = run.counts;
  const head = el(
    'p',
    { class: `run-head verdict-${run.status}` },
    `Run of v${run.version}: ${run.status} · ${c.passed}/${c.total} passed`,
    c.failed ? ` · ${c.failed} failed` : '',
    c.errored ? ` · ${c.errored} errored` : '',
  );
  const cases = run.cases.map((k) => {
    const attempts = (k.repeats ?? []).map((r) => {
      const id = r.observed?.sessionId;
      const button = el(
        'button',
        { type: 'button', class: `small attempt verdict-${r.verdict}`, 'data-session-id': id ?? '' },
        `attempt ${r.index + 1}: ${r.verdict}`,
      );
      if (!id) button.disabled = true;
      else {
        button.addEventListener(
          'click',
          () =>
            void openSession({ id, agentId: run.agentId, sessionType: 'test', version: run.version }, button),
        );
      }
      return button;
    });
    return el(
      'li',
      { class: 'run-case', 'data-case-id': k.caseId },
      el('span', { class: `verdict verdict-${k.verdict}` }, k.verdict),
      ` ${k.name} · pass rate ${pct(k.passRate)}`,
      ...(k.failures ?? []).map((f) => el('p', { class: 'failure' }, f.message)),
      ...(k.error ? [el('p', { class: 'failure' }, k.error)] : []),
      el('div', { class: 'attempts' }, ...attempts),
    );
  });
  $('run').replaceChildren(head, el('ul', { class: 'run-cases' }, ...cases));
}

async function runTests() {
  const agentId = state.agentId;
  if (!agentId) return;
  $('run-tests').disabled = true;
  try {
    const apiKeys = keysOf();
    let run = await json('POST', `${agentPath(agentId)}/test-runs`, apiKeys ? { apiKeys } : {});
    setStatus(`Test run ${run.id} started`);
    while (run.status === 'queued' || run.status === 'running') {
      renderRun(run);
      await new Promise((r) => setTimeout(r, RUN_POLL_MS));
      if (agentId !== state.agentId) return;
      run = await json('GET', `${agentPath(agentId)}/test-runs/${enc(run.id)}`);
    }
    rememberAttempts([run]);
    renderRun(run);
    setStatus(`Test run ${run.status}`, run.status !== 'passed');
    await loadSessions(agentId);
  } catch (err) {
    showError(err, 'Running the tests');
  } finally {
    $('run-tests').disabled = false;
  }
}

/** The session shown, replayed as a test case: its user turns, and the step path it took as expected. */
async function addCase() {
  const s = state.session;
  if (!s) return;
  try {
    const c = await json('POST', `${agentPath(s.agentId)}/test-cases`, {
      fromSession: s.sessionId,
      name: `Replay of ${s.sessionId.slice(0, 8)}`,
    });
    setStatus(`Test case "${c.name}" added`);
    await loadTests(s.agentId);
  } catch (err) {
    showError(err, 'Adding the test case');
  }
}

// ---- pickers -------------------------------------------------------------------------------------

/** A test-run attempt by its case and verdict; any other session by its version and status. */
function sessionLabel(s) {
  const attempt = state.attempts.get(s.id);
  const version = s.version ? `v${s.version}` : 'draft';
  return attempt ? `${attempt.name} · ${attempt.verdict} · ${version}` : `${version} · ${s.status}`;
}

async function loadSessions(agentId) {
  const list = $('sessions');
  try {
    const sessions = await json('GET', `${agentPath(agentId)}/test-sessions`);
    if (agentId !== state.agentId) return;
    list.replaceChildren(
      ...sessions.map((s) => {
        const button = el(
          'button',
          { type: 'button', 'data-session-id': s.id },
          el('span', { class: 'when' }, `${time(s.startedAt)} · ${s.sessionType}`),
          el('span', { class: 'what' }, sessionLabel(s)),
        );
        if (state.session?.sessionId === s.id) button.setAttribute('aria-current', 'true');
        button.addEventListener('click', () => void openSession({ ...s, agentId }, button));
        return el('li', {}, button);
      }),
    );
    if (sessions.length === 0) list.replaceChildren(el('li', { class: 'muted' }, 'None yet.'));
  } catch (err) {
    showError(err, 'Loading past sessions');
  }
}

async function pickAgent(agentId) {
  state.agentId = agentId;
  state.agent = null;
  const select = $('version');
  select.replaceChildren();
  $('sessions').replaceChildren();
  $('cases').replaceChildren();
  $('run').replaceChildren();
  state.attempts = new Map();
  if (!agentId) return;
  try {
    const [agent, versions] = await Promise.all([
      json('GET', agentPath(agentId)),
      json('GET', `${agentPath(agentId)}/versions`),
    ]);
    if (agentId !== state.agentId) return;
    state.agent = agent;
    select.append(
      el('option', { value: 'latest' }, `Latest (version ${agent.version})`),
      el('option', { value: 'draft' }, 'Draft (the stored flow, sent as is)'),
      ...versions
        .sort((a, b) => b.version - a.version)
        .map((v) =>
          el(
            'option',
            { value: String(v.version) },
            `Version ${v.version} · ${new Date(v.createdAt).toLocaleString()}`,
          ),
        ),
    );
    $('flow-json').value = JSON.stringify(agent.flow, null, 2);
    showIssues([]);
    if (!state.session) {
      drawFlow(agent.flow);
      void showStats(agentId, agent.version, state.gen);
    }
    await loadTests(agentId);
    await loadSessions(agentId);
  } catch (err) {
    showError(err, 'Loading the agent');
  }
}

async function loadAgents() {
  try {
    const agents = await json('GET', '/api/agents');
    const select = $('agent');
    select.replaceChildren(
      el('option', { value: '' }, agents.length ? 'Choose an agent…' : 'No agents yet'),
      ...agents.map((a) => el('option', { value: a.id }, a.name)),
    );
    setStatus(plural(agents.length, 'agent'));
    return agents;
  } catch (err) {
    showError(err, 'Loading agents');
    return [];
  }
}

function init() {
  $('agent').addEventListener('change', (e) => {
    resetView();
    drawFlow(null);
    void pickAgent(e.target.value);
  });
  $('start-form').addEventListener('submit', (e) => {
    e.preventDefault();
    void startSession();
  });
  $('turn-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = $('turn');
    const text = input.value.trim();
    if (!text || $('send').disabled) return;
    input.value = '';
    void sendTurn(text);
  });
  $('end').addEventListener('click', () => void endSession());
  $('refresh').addEventListener('click', () => state.agentId && void loadSessions(state.agentId));
  new ResizeObserver(() => drawChart()).observe($('chart'));
  new ResizeObserver(() => state.flow !== undefined && drawFlow(state.flow)).observe($('flow').parentElement);
  $('keys').value = stored.get(KEYS_KEY);
  $('keys').addEventListener('input', () => {
    stored.set(KEYS_KEY, $('keys').value);
    $('needs').hidden = true;
  });
  $('create').addEventListener('click', () => void createAgent());
  $('validate').addEventListener('click', () => void validateEditor());
  $('save').addEventListener('click', () => void saveEditor());
  $('run-tests').addEventListener('click', () => void runTests());
  $('add-case').addEventListener('click', () => void addCase());
  drawFlow(null);
  void loadAgents();
}

init();
