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
    note('branch', 'Branch', `${ev.stepId} → ${ev.exit}${ev.attempt > 1 ? ` (attempt ${ev.attempt})` : ''}`),
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
const MIN_VIEW_W = 520;
const MIN_VIEW_H = 400;

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

function drawFlow(flow) {
  const root = $('flow');
  root.replaceChildren();
  state.nodes = new Map();
  if (!flow || flow.nodes.length === 0) {
    root.setAttribute('viewBox', '0 0 300 60');
    root.append(svg('text', { x: 10, y: 30, class: 'empty' }, 'No flow to draw.'));
    return;
  }
  const at = layout(flow);
  const xs = [...at.values()].map((p) => p.x);
  const ys = [...at.values()].map((p) => p.y);
  const pad = 16;
  const left = Math.min(...xs) - pad;
  const top = Math.min(...ys) - pad;
  const w = Math.max(...xs) + BOX_W + pad - left;
  const h = Math.max(...ys) + BOX_H + pad - top;
  // a small flow is not blown up: at least this much canvas, the flow centred in it
  const width = Math.max(w, MIN_VIEW_W);
  const height = Math.max(h, MIN_VIEW_H);
  root.setAttribute('viewBox', `${left - (width - w) / 2} ${top - (height - h) / 2} ${width} ${height}`);
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
  const centre = (id) => ({ x: at.get(id).x + BOX_W / 2, y: at.get(id).y + BOX_H / 2 });
  for (const e of flow.edges) {
    if (!at.has(e.source) || !at.has(e.target) || e.source === e.target) continue;
    const a = centre(e.source);
    const b = centre(e.target);
    const from = border(a, b.x - a.x, b.y - a.y);
    const to = border(b, a.x - b.x, a.y - b.y);
    const line = svg('line', {
      class: 'edge',
      x1: from.x,
      y1: from.y,
      x2: to.x,
      y2: to.y,
      'marker-end': 'url(#arrow)',
    });
    line.append(svg('title', {}, `${e.source} (${e.sourceHandle}) → ${e.target}`));
    root.append(line);
  }
  for (const n of flow.nodes) {
    const p = at.get(n.id);
    const name = typeof n.name === 'string' && n.name ? n.name : n.id;
    const g = svg(
      'g',
      { class: 'node', 'data-node-id': n.id, transform: `translate(${p.x} ${p.y})` },
      svg('title', {}, `${n.id} (${n.nodeType})`),
      svg('rect', { width: BOX_W, height: BOX_H, rx: 6 }),
      svg('text', { x: 8, y: 17, class: 'name' }, clip(name, 15)),
      svg('text', { x: 8, y: 31, class: 'type' }, String(n.nodeType ?? '')),
    );
    state.nodes.set(n.id, g);
    root.append(g);
  }
  if (state.step) setStep(state.step);
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

function addTurn(metrics) {
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
  const max = niceMax(Math.max(...turns.flatMap((t) => figures.map(([k]) => t[k] ?? 0))));
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
    drawFlow(flow);
    const result = await json('POST', `${agentPath(agentId)}/text-sessions`, body);
    if (gen !== state.gen) return;
    const version = body.flow ? undefined : (body.version ?? state.agent?.version);
    state.session = { agentId, sessionId: result.sessionId, version, live: true, ended: false };
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

// ---- pickers -------------------------------------------------------------------------------------

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
          el('span', { class: 'what' }, `${s.version ? `v${s.version}` : 'draft'} · ${s.status}`),
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
    if (!state.session) {
      drawFlow(agent.flow);
      void showStats(agentId, agent.version, state.gen);
    }
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
  } catch (err) {
    showError(err, 'Loading agents');
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
  drawFlow(null);
  void loadAgents();
}

init();
