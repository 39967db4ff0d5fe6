// @ts-check
// Calls: the agent's production conversations (its live deploys' callers), kept apart from test sessions.
// Listed newest first with filters (channel, how it ended, which deploy); one opened shows as a past test
// session does: its transcript replayed from its events beside its recording (the conversation's views,
// reading the call's own routes). docs/api.md, "The console".

import { agentPath, callPath, json } from '../lib/api.js';
import { CALL_CHANNELS, ENDED_REASONS } from '../lib/live-contracts.js';
import { store } from '../store/store.js';
import { $, el, showError, time } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * The API's own shapes (packages/client/src/schema.ts, made from the contracts), for the checker only.
 * @typedef {import('../../../../packages/client/src/schema.ts').operations} Ops
 * @typedef {Ops['callsList']['responses'][200]['content']['application/json']} CallList
 * @typedef {CallList['calls'][number]} CallSummary
 */

/** The next page's cursor of the list shown ('' when it is the last). */
let nextCursor = '';

const seconds = (ms) => (ms === undefined || ms === null ? '–' : `${(ms / 1000).toFixed(1)} s`);
const words = (v) => v.replaceAll('_', ' ');

/** The time range's choices: calls started within the last … (the API's `from`, epoch ms). */
const SINCE = [
  ['', 'any time'],
  [String(3_600_000), 'last hour'],
  [String(86_400_000), 'last 24 hours'],
  [String(7 * 86_400_000), 'last 7 days'],
];

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
  const since = $('calls-since').value;
  if (since) q.set('from', String(Date.now() - Number(since)));
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** How it ended, in words: the reason, and what more it says (the cap a busy call met, the provider). */
function endOf(c) {
  if (c.status === 'active') return 'in progress';
  const reason = c.endedReason ? words(c.endedReason) : 'ended';
  const d = c.endedDetail;
  if (!d) return c.transferredTo ? `${reason} to ${c.transferredTo}` : reason;
  return `${reason} (${d.provider ? `${d.provider} ` : ''}${words(d.kind)})`;
}

/** Who called: a phone number's last digits, or that it was the web (its address is kept only as a hash). */
const callerOf = (c) => (c.caller.from ? `from ${c.caller.from}` : c.channel);

/** @param {string} agentId @param {CallSummary} c */
function callItem(agentId, c) {
  const p50 = c.figures?.responseMs?.p50;
  const button = el(
    'button',
    {
      type: 'button',
      'data-call-id': c.id,
      'data-channel': c.channel,
      'data-ended-reason': c.endedReason ?? '',
    },
    el('span', { class: 'when' }, `${time(c.startedAt)} · ${callerOf(c)}`),
    el(
      'span',
      { class: 'what' },
      `v${c.version} · #${c.deployNumber} · ${seconds(c.durationMs)} · ${endOf(c)}` +
        (p50 === undefined ? '' : ` · response p50 ${Math.round(p50)} ms`),
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
    /** @type {CallList} */
    const page = await json(
      'GET',
      `${agentPath(agentId)}/calls${filtersQuery(more ? nextCursor : '')}`,
      undefined,
      { signal: store.agentSignal },
    );
    nextCursor = page.nextCursor ?? '';
    const items = page.calls.map((c) => callItem(agentId, c));
    if (more) $('calls').append(...items);
    else $('calls').replaceChildren(...items);
    if (!more && items.length === 0) $('calls').replaceChildren(el('li', { class: 'muted' }, 'No calls.'));
    $('calls-more').hidden = !nextCursor;
    markShown();
  } catch (err) {
    showError(err, 'Loading the calls');
  }
}

/** The deploy filter's choices: the agent's deploys, as the Deploy panel last loaded them. */
function deployChoices(deploys) {
  const chosen = $('calls-deploy').value;
  $('calls-deploy').replaceChildren(
    el('option', { value: '' }, 'any deploy'),
    ...deploys.map((d) => el('option', { value: d.id }, `#${d.deployNumber} · v${d.version}`)),
  );
  if (deploys.some((d) => d.id === chosen)) $('calls-deploy').value = chosen;
}

/** The call on screen is marked in the list. */
function markShown() {
  const shown = store.session?.kind === 'call' ? store.session.sessionId : '';
  for (const b of $('calls').querySelectorAll('button')) {
    if (b.dataset.callId === shown) b.setAttribute('aria-current', 'true');
    else b.removeAttribute('aria-current');
  }
}

const select = (id, label, choices) =>
  el('select', { id, 'aria-label': label }, ...choices.map(([v, text]) => el('option', { value: v }, text)));

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
        select('calls-channel', 'Channel', [['', 'any channel'], ...CALL_CHANNELS.map((c) => [c, c])]),
        select('calls-reason', 'How it ended', [['', 'any end'], ...ENDED_REASONS.map((r) => [r, words(r)])]),
      ),
      el(
        'div',
        { class: 'row filters' },
        select('calls-deploy', 'Deploy', [['', 'any deploy']]),
        select('calls-since', 'Started', SINCE),
      ),
      el('ul', { id: 'calls', class: 'session-list calls' }),
      more,
    );
    store.on('agent', (agent) => {
      nextCursor = '';
      $('calls').replaceChildren();
      deployChoices([]);
      more.hidden = true;
      if (agent) void loadCalls();
    });
    store.on('deploys', deployChoices);
    store.on('session', markShown);
    store.on('reset', markShown);
    for (const id of ['calls-channel', 'calls-reason', 'calls-deploy', 'calls-since'])
      $(id).addEventListener('change', () => void loadCalls());
    refresh.addEventListener('click', () => void loadCalls());
    more.addEventListener('click', () => void loadCalls(true));
  },
});
