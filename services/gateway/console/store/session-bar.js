// @ts-check
// The session on screen, above its conversation: which one it is, what its agent does now (a live voice
// session), and the End button of a live one.

import { $ } from '../ui/dom.js';
import { store } from './store.js';

/** Which session the conversation is: its kind, id (shortened; whole in the tooltip) and version. */
function showInfo(s) {
  const info = $('conv-info');
  info.textContent = `· ${s.kind} ${s.sessionId.slice(0, 8)}… · ${s.version ? `version ${s.version}` : 'draft'}`;
  info.title = s.sessionId;
}

/** The agent's state (listening, thinking, speaking), shown beside the conversation's title. */
function showAgentState(value) {
  const badge = $('agent-state');
  badge.hidden = !value;
  badge.textContent = value ?? '';
  badge.dataset.state = value ?? '';
}

export function mount() {
  store.on('reset', () => {
    $('conv-info').textContent = '';
    $('conv-info').removeAttribute('title');
    $('end').disabled = true;
    showAgentState(null);
  });
  store.on('session', (s) => {
    showInfo(s);
    $('end').disabled = !s.live || s.ended;
  });
  store.on('ended', () => {
    $('end').disabled = true;
    showAgentState(null);
  });
  store.on('agent-state', showAgentState);
  store.on('event', (ev) => {
    if (ev.type === 'agent_state' && store.session?.live && !store.session.ended) showAgentState(ev.state);
  });
  $('end').addEventListener('click', () => {
    const s = store.session;
    if (s?.live && !s.ended) void s.end?.();
  });
}
