// @ts-check
// Calls: the agent's production conversations (its live deploys' callers), kept apart from test sessions.
// Listed newest first with filters (channel, how it ended, which deploy); one opened shows as a past test
// session does: its transcript replayed from its events beside its recording (the conversation's views,
// reading the call's own routes). docs/api.md, "The console".

import { agentPath, callPath, json } from '../lib/api.js';
import { store } from '../store/store.js';
import { $, el, showError, time } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/** How a call ended (docs/api.md, calls' `endedReason`), for the filter. */
const ENDED_REASONS = [
  'caller_hung_up',
  'agent_ended',
  'transferred',
  'max_duration',
  'silence_timeout',
  'busy',
  'provider_error',
  'instance_lost',
  'drained',
  'gateway_lost',
  'no_connect',
];
const CHANNELS = ['web', 'phone'];

/** The next page's cursor of the list shown ('' when it is the last). */
let nextCursor = '';

const seconds = (ms) => (ms === undefined || ms === null ? '–' : `${(ms / 1000).toFixed(1)} s`);

function filtersQuery(cursor) {
  const q = new URLSearchParams();
  for (const [id, name] of [
    ['calls-channel', 'channel'],
    ['calls-reason', 'endedReason'],
    ['calls-deploy', 'deployId'],
  ]) {
    const v = $(id).value;
    if (v) q.set(name, v);
  }
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `?${s}` : '';
}

function callItem(agentId, c) {
  const button = el(
    'button',
    { type: 'button', 'data-call-id': c.id },
    el('span', { class: 'when' }, `${time(c.startedAt)} · ${c.channel}`),
    el(
      'span',
      { class: 'what' },
      `v${c.version} · ${seconds(c.durationMs)} · ${c.endedReason ?? 'in progress'}`,
    ),
  );
  button.addEventListener(
    'click',
    () =>
      void store.open({
        id: c.id,
        agentId,
        sessionType: 'call',
        version: c.version,
        path: callPath(agentId, c.id),
      }),
  );
  return el('li', {}, button);
}

/** The list (again, or its next page with `more`). */
async function loadCalls(more = false) {
  const agentId = store.agentId;
  if (!agentId) return;
  try {
    const page = await json(
      'GET',
      `${agentPath(agentId)}/calls${filtersQuery(more ? nextCursor : '')}`,
      undefined,
      {
        signal: store.agentSignal,
      },
    );
    nextCursor = page.nextCursor ?? '';
    const items = page.calls.map((c) => callItem(agentId, c));
    if (more) $('calls').append(...items);
    else $('calls').replaceChildren(...items);
    if (!more && items.length === 0) $('calls').replaceChildren(el('li', { class: 'muted' }, 'No calls.'));
    $('calls-more').hidden = !nextCursor;
  } catch (err) {
    showError(err, 'Loading the calls');
  }
}

/** The deploy filter's choices: the agent's deploys. */
async function loadDeployChoices(agentId) {
  try {
    const deploys = await json('GET', `${agentPath(agentId)}/deploys`, undefined, {
      signal: store.agentSignal,
    });
    $('calls-deploy').replaceChildren(
      el('option', { value: '' }, 'any deploy'),
      ...deploys.map((d) => el('option', { value: d.id }, `#${d.deployNumber} · v${d.version}`)),
    );
  } catch (err) {
    showError(err, 'Loading the deploys');
  }
}

const select = (id, label, first, values) =>
  el(
    'select',
    { id, 'aria-label': label },
    el('option', { value: '' }, first),
    ...values.map((v) => el('option', { value: v }, v.replaceAll('_', ' '))),
  );

definePanel({
  name: 'calls',
  title: 'Calls',
  mount(section, heading) {
    const refresh = el('button', { type: 'button', id: 'calls-refresh', class: 'small' }, 'Refresh');
    const more = el('button', { type: 'button', id: 'calls-more', class: 'small', hidden: '' }, 'More');
    section.append(
      el('div', { class: 'row between' }, heading, refresh),
      el(
        'div',
        { class: 'row filters' },
        select('calls-channel', 'Channel', 'any channel', CHANNELS),
        select('calls-reason', 'How it ended', 'any end', ENDED_REASONS),
        select('calls-deploy', 'Deploy', 'any deploy', []),
      ),
      el('ul', { id: 'calls', class: 'session-list calls' }),
      more,
    );
    store.on('agent', (agent) => {
      nextCursor = '';
      $('calls').replaceChildren();
      more.hidden = true;
      if (!agent) return;
      void loadDeployChoices(agent.id);
      void loadCalls();
    });
    // the call on screen is marked in the list
    store.on('session', (s) => {
      for (const b of $('calls').querySelectorAll('button')) {
        if (b.dataset.callId === s.sessionId) b.setAttribute('aria-current', 'true');
        else b.removeAttribute('aria-current');
      }
    });
    for (const id of ['calls-channel', 'calls-reason', 'calls-deploy'])
      $(id).addEventListener('change', () => void loadCalls());
    refresh.addEventListener('click', () => void loadCalls());
    more.addEventListener('click', () => void loadCalls(true));
  },
});
