// @ts-check
// The agent console (docs/api.md, "The console"): the conversation, the events stream, the views and
// the pickers; the other modules of this folder draw, build and test. Plain browser JavaScript, no
// dependencies: everything it shows comes from this origin's /api.

import { agentPath, call, enc, errorOf, json, sessionPath, sseMessages, ticketFor } from './api.js';
import { createAgent, readyToRun, saveEditor, showIssues, validateEditor } from './build.js';
import { addTurn, drawChart, showStats } from './chart.js';
import { $, clip, el, ms, plural, setStatus, short, showError, time } from './dom.js';
import { drawFlow, exitLabel, setStep } from './flow-drawing.js';
import { EVENT_TYPES, KEYS_KEY, state, stored, STREAM_RETRIES } from './state.js';
import { showAgentState, showTalk, stopTalk, leaveTalk, toggleTalk } from './talk.js';
import { addCase, loadTests, runTests } from './tests-panel.js';
import {
  clearRecording,
  initRecording,
  noteTranscript,
  onAgentState,
  resetTimeline,
  showRecording,
  stampReply,
  stampUser,
} from './timeline.js';

// ---- conversation --------------------------------------------------------------------------------

export function append(item) {
  const log = $('log');
  const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.append(item);
  if (atBottom) log.scrollTop = log.scrollHeight;
  return item;
}

/** A line for what happened between the messages: a step, a tool call, a branch, a transfer… */
export function note(kind, label, text) {
  return append(el('li', { class: `event ${kind}` }, el('strong', {}, label), ` ${text}`));
}

export function userBubble(text, pending = false) {
  const li = el('li', { class: 'user' }, text);
  if (pending) li.dataset.pending = 'true';
  return append(li);
}

export function replyBubble(replyId) {
  let li = state.replies.get(replyId);
  if (!li) {
    li = append(el('li', { class: 'agent', 'data-reply-id': replyId }));
    state.replies.set(replyId, li);
  }
  return li;
}

/**
 * A voice reply the user interrupted is kept as far as it was heard, and its final event may come under an id
 * of its own: it ends the streamed bubble it cuts short (the one whose text begins with it) rather than
 * showing it twice.
 */
function cutReply(ev) {
  const text = ev.text.trim();
  if (!text) return undefined;
  const li = [...$('log').querySelectorAll('li.agent.streaming')].find((b) => b.textContent.startsWith(text));
  if (li) state.replies.set(ev.replyId, li);
  return li;
}

export function onUserTurn(ev) {
  noteTranscript(ev);
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
  stampUser(pending ?? userBubble(ev.text), ev);
}

/** A voice turn's figures, as a line under it: what the caller felt, and where the time went. */
const VOICE_FIGURES = [
  ['responseMs', 'response'],
  ['e2eLatencyMs', 'first audio'],
  ['transcriptionDelayMs', 'transcript'],
  ['endOfTurnDelayMs', 'end of turn'],
  ['llmTtftMs', 'LLM first token'],
  ['ttsTtfbMs', 'TTS first byte'],
];

export function onTurnMetrics(ev) {
  addTurn(ev.metrics);
  if (state.turnSeen) state.turnSeen.metrics = true;
  if (ev.metrics.responseMs === undefined && ev.metrics.e2eLatencyMs === undefined) return;
  const parts = VOICE_FIGURES.filter(([k]) => ev.metrics[k] !== undefined).map(
    ([k, label]) => `${label} ${ms(ev.metrics[k])}`,
  );
  note('figures', 'Turn', parts.join(' · '));
}

export function onTool(ev) {
  if (ev.type === 'tool_called') {
    note('tool', `Tool ${ev.name}`, `called (${ev.source}) with ${short(ev.arguments)}`);
    return;
  }
  if (ev.error !== undefined)
    note('tool bad', `Tool ${ev.name}`, `failed after ${ms(ev.durationMs)}: ${short(ev.error)}`);
  else note('tool', `Tool ${ev.name}`, `answered in ${ms(ev.durationMs)}: ${short(ev.result ?? '')}`);
}

export function onPostProcessing(ev) {
  if (ev.kind === 'structured_output') {
    if (ev.ok) note('ok', 'Structured output', short(ev.output ?? {}));
    else note('bad', 'Structured output', `failed: ${ev.error ?? 'no output'}`);
    return;
  }
  const status = ev.status === undefined ? '' : ` (HTTP ${ev.status})`;
  if (ev.ok) note('ok', 'Webhook', `delivered${status}`);
  else note('bad', 'Webhook', `failed${status}${ev.error ? `: ${ev.error}` : ''}`);
}

export function onUsage(ev) {
  const parts = ev.usage.map((u) => {
    if (u.kind === 'llm')
      return `${u.model}: ${u.promptTokens ?? 0} in / ${u.completionTokens ?? 0} out tokens`;
    if (u.kind === 'tts') return `${u.model}: ${u.ttsCharacters ?? 0} characters`;
    return `${u.model}: ${u.sttAudioSeconds ?? 0} s of audio`;
  });
  $('usage').textContent = parts.length ? `Usage: ${parts.join(' · ')}` : '';
}

export const handlers = {
  session_started: (ev) =>
    note('info', 'Session started', `${ev.sessionType}, ${ev.version ? `version ${ev.version}` : 'draft'}`),
  session_ended: (ev) => {
    note('info', 'Session ended', `(${ev.reason}) after ${(ev.durationMs / 1000).toFixed(1)} s`);
    sessionEnded();
    showAgentState(null);
  },
  agent_state: (ev) => {
    onAgentState(ev);
    if (state.session?.live && !state.session.ended) showAgentState(ev.state);
  },
  recording_started: () => note('info', 'Recording', 'started'),
  step_entered: (ev) => {
    setStep(ev.stepId);
    note('step', 'Step', `${ev.stepId} (${ev.stepType})`);
  },
  user_turn: onUserTurn,
  agent_reply_delta: (ev) => {
    const li = replyBubble(ev.replyId);
    stampReply(li, ev);
    li.classList.add('streaming');
    li.textContent += ev.delta;
  },
  agent_reply: (ev) => {
    const li = state.replies.get(ev.replyId) ?? cutReply(ev) ?? replyBubble(ev.replyId);
    stampReply(li, ev);
    if (li.textContent !== ev.text && li.textContent.startsWith(ev.text)) {
      li.classList.add('cut');
      li.title = 'Interrupted: the rest was never heard';
    }
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
  turn_metrics: onTurnMetrics,
  usage: onUsage,
  error: (ev) => note('bad', `Error ${ev.code}`, ev.message),
};

/** One session event, from whichever stream brought it first (ids are per session: each is shown once). */
export function handleEvent(ev) {
  if (typeof ev.id === 'number') {
    if (state.seen.has(ev.id)) return;
    state.seen.add(ev.id);
    state.lastId = Math.max(state.lastId, ev.id);
  }
  handlers[ev.type]?.(ev);
}

export function sessionEnded() {
  if (!state.session) return;
  state.session.ended = true;
  $('turn').disabled = true;
  $('send').disabled = true;
  $('end').disabled = true;
}

// ---- the events stream ---------------------------------------------------------------------------

/**
 * Follows a session's events with an EventSource. A ticket is single use, so the browser's own reconnect
 * (same URL) cannot work with one: on a dropped connection the page opens a new stream itself, with a new
 * ticket, from the last event it has.
 */
export async function follow(agentId, sessionId, gen, attempt = 0) {
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
  es.addEventListener('error', (/** @type {MessageEvent} */ e) => {
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
export async function closedSession(agentId, sessionId, gen) {
  try {
    const record = await json('GET', sessionPath(agentId, sessionId));
    if (gen !== state.gen || record.status !== 'closed') return gen !== state.gen;
    sessionEnded();
    if (state.seen.size > 0) return true;
    const messages = await json('GET', `${sessionPath(agentId, sessionId)}/messages`);
    if (gen !== state.gen) return true;
    note('info', 'Transcript', 'no events were recorded for this session');
    for (const m of messages) {
      const li = m.role === 'user' ? userBubble(m.content) : append(el('li', { class: 'agent' }, m.content));
      li.dataset.firstAt = String(m.timestamp);
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
export function sessionInfo(kind, id, version) {
  const info = $('conv-info');
  info.textContent = `· ${kind} ${id.slice(0, 8)}… · ${version ? `version ${version}` : 'draft'}`;
  info.title = id;
}

// ---- views ---------------------------------------------------------------------------------------

export function resetView() {
  state.gen++;
  leaveTalk();
  clearRecording();
  resetTimeline();
  showAgentState(null);
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

export async function flowOf(agentId, version) {
  if (version) return (await json('GET', `${agentPath(agentId)}/versions/${version}`)).flow;
  return state.agent?.id === agentId ? state.agent.flow : (await json('GET', agentPath(agentId))).flow;
}

/** @returns {Record<string, string> | undefined} */
export function keysOf() {
  /** @type {Record<string, string>} */
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
export function applyResult(result, seen) {
  if (seen.replies === 0) for (const r of result.replies) append(el('li', { class: 'agent' }, r));
  if (!seen.metrics && result.metrics) addTurn(result.metrics);
  if (result.stepId && result.stepId !== state.step) setStep(result.stepId);
  if (result.ended) sessionEnded();
}

export async function startSession() {
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

export async function sendTurn(text) {
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

export async function endSession() {
  const s = state.session;
  if (!s?.live || s.ended) return;
  if (s.voice) return stopTalk();
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
export async function openSession(s, button) {
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
  if (s.sessionType === 'voice')
    void showRecording(s.agentId, s.id, gen).catch((err) => showError(err, 'Loading the recording'));
}

// ---- pickers -------------------------------------------------------------------------------------

/** A test-run attempt by its case and verdict; any other session by its version and status. */
export function sessionLabel(s) {
  const attempt = state.attempts.get(s.id);
  const version = s.version ? `v${s.version}` : 'draft';
  return attempt ? `${attempt.name} · ${attempt.verdict} · ${version}` : `${version} · ${s.status}`;
}

export async function loadSessions(agentId) {
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

export async function pickAgent(agentId) {
  state.agentId = agentId;
  state.agent = null;
  const select = $('version');
  select.replaceChildren();
  $('sessions').replaceChildren();
  $('cases').replaceChildren();
  $('run').replaceChildren();
  state.attempts = new Map();
  showTalk();
  if (!agentId) return;
  try {
    const [agent, versions] = await Promise.all([
      json('GET', agentPath(agentId)),
      json('GET', `${agentPath(agentId)}/versions`),
    ]);
    if (agentId !== state.agentId) return;
    state.agent = agent;
    showTalk();
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

export async function loadAgents() {
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

export function init() {
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
  $('talk').addEventListener('click', () => void toggleTalk());
  initRecording();
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
