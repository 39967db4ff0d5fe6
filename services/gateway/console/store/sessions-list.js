// @ts-check
// The chosen agent's past test sessions: each opens its replay.

import { agentPath, json } from '../lib/api.js';
import { $, el, showError, time } from '../ui/dom.js';
import { store } from './store.js';

/** The list as last loaded (relabelled when test-run attempts are learned); null before. */
let sessions = null;

/** A test-run attempt by its case and verdict; any other session by its version and status. */
function sessionLabel(s) {
  const attempt = store.attempts.get(s.id);
  const version = s.version ? `v${s.version}` : 'draft';
  return attempt ? `${attempt.name} · ${attempt.verdict} · ${version}` : `${version} · ${s.status}`;
}

function render() {
  if (!sessions) return;
  const list = $('sessions');
  const agentId = store.agentId;
  list.replaceChildren(
    ...sessions.map((s) => {
      const button = el(
        'button',
        { type: 'button', 'data-session-id': s.id },
        el('span', { class: 'when' }, `${time(s.startedAt)} · ${s.sessionType}`),
        el('span', { class: 'what' }, sessionLabel(s)),
      );
      if (store.session?.sessionId === s.id) button.setAttribute('aria-current', 'true');
      button.addEventListener('click', () => void store.open({ ...s, agentId }));
      return el('li', {}, button);
    }),
  );
  if (sessions.length === 0) list.replaceChildren(el('li', { class: 'muted' }, 'None yet.'));
}

async function load() {
  const agentId = store.agentId;
  if (!agentId) return;
  try {
    sessions = await json('GET', `${agentPath(agentId)}/test-sessions`, undefined, {
      signal: store.agentSignal,
    });
    render();
  } catch (err) {
    showError(err, 'Loading past sessions');
  }
}

/** The session on screen is marked in the list. */
function mark(sessionId) {
  for (const b of $('sessions').querySelectorAll('button')) {
    if (b.dataset.sessionId === sessionId) b.setAttribute('aria-current', 'true');
    else b.removeAttribute('aria-current');
  }
}

export function mount() {
  store.on('agent', (agent) => {
    sessions = null;
    $('sessions').replaceChildren();
    if (agent) void load();
  });
  store.on('sessions', () => void load());
  store.on('attempts', render);
  store.on('session', (s) => mark(s.sessionId));
  store.on('reset', () => mark(''));
  $('refresh').addEventListener('click', () => void load());
}
