// @ts-check
// The conversation: the session's messages as they come (a reply streamed from its deltas, interim
// transcripts replaced by the final one) and a line for everything else that happened between them.

import { $, el, ms, short } from '../ui/dom.js';
import { exitLabel } from './flow-view.js';
import { store } from './store.js';
import { noteTranscript, onAgentState, stampReply, stampUser } from './timeline.js';

/** Reply bubbles by reply id, and the interim transcript shown. */
let replies = new Map();
/** @type {HTMLElement | null} */
let interim = null;

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
  let li = replies.get(replyId);
  if (!li) {
    li = append(el('li', { class: 'agent', 'data-reply-id': replyId }));
    replies.set(replyId, li);
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
  if (li) replies.set(ev.replyId, li);
  return li;
}

function onUserTurn(ev) {
  noteTranscript(ev);
  if (!ev.final) {
    interim ??= append(el('li', { class: 'user interim' }));
    interim.textContent = ev.text;
    return;
  }
  interim?.remove();
  interim = null;
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

function onTurnMetrics(ev) {
  if (ev.metrics.responseMs === undefined && ev.metrics.e2eLatencyMs === undefined) return;
  const parts = VOICE_FIGURES.filter(([k]) => ev.metrics[k] !== undefined).map(
    ([k, label]) => `${label} ${ms(ev.metrics[k])}`,
  );
  note('figures', 'Turn', parts.join(' · '));
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

/** What each event adds to the conversation (the flow, the chart and the badge show theirs themselves). */
const handlers = {
  session_started: (ev) =>
    note('info', 'Session started', `${ev.sessionType}, ${ev.version ? `version ${ev.version}` : 'draft'}`),
  session_ended: (ev) =>
    note('info', 'Session ended', `(${ev.reason}) after ${(ev.durationMs / 1000).toFixed(1)} s`),
  agent_state: onAgentState,
  recording_started: () => note('info', 'Recording', 'started'),
  step_entered: (ev) => note('step', 'Step', `${ev.stepId} (${ev.stepType})`),
  user_turn: onUserTurn,
  dtmf: (ev) => note('info', 'Key', `the caller pressed ${ev.digit}`),
  agent_reply_delta: (ev) => {
    const li = replyBubble(ev.replyId);
    stampReply(li, ev);
    li.classList.add('streaming');
    li.textContent += ev.delta;
  },
  agent_reply: (ev) => {
    const li = replies.get(ev.replyId) ?? cutReply(ev) ?? replyBubble(ev.replyId);
    stampReply(li, ev);
    if (li.textContent !== ev.text && li.textContent.startsWith(ev.text)) {
      li.classList.add('cut');
      li.title = 'Interrupted: the rest was never heard';
    }
    li.classList.remove('streaming');
    li.textContent = ev.text;
  },
  tool_called: onTool,
  tool_result: onTool,
  branch_decided: (ev) =>
    note(
      'branch',
      'Branch',
      `${ev.stepId} → ${exitLabel(ev.stepId, ev.exit)}${ev.attempt > 1 ? ` (attempt ${ev.attempt})` : ''}`,
    ),
  transfer: (ev) => {
    const to = ev.targetNumber !== undefined ? `to ${ev.targetNumber}` : `to agent ${ev.targetAgentId}`;
    if (ev.ok) note('ok', 'Transfer', to);
    else note('bad', 'Transfer', `${to} failed (${ev.reason ?? 'error'})`);
  },
  post_processing: onPostProcessing,
  turn_metrics: onTurnMetrics,
  error: (ev) => note('bad', `Error ${ev.code}`, ev.message),
};

export function mount() {
  store.on('reset', () => {
    replies = new Map();
    interim = null;
    $('log').replaceChildren();
  });
  store.on('event', (ev) => handlers[ev.type]?.(ev));
  store.on('note', ({ kind, label, text }) => note(kind, label, text));
  store.on('message', ({ role, text, at }) => {
    const li = role === 'user' ? userBubble(text) : append(el('li', { class: 'agent' }, text));
    if (at !== undefined) li.dataset.firstAt = String(at);
  });
  // what this page sent, shown at once (its user_turn event confirms it)
  store.on('sent', (text) => userBubble(text, true));
}
