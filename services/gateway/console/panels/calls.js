// @ts-check
// Calls: the agent's production conversations (its live deploys' callers), kept apart from test sessions.
// Listed newest first with filters (channel, how it ended, which deploy); one opened shows as a past test
// session does: its transcript replayed from its events beside its recording (the conversation's views,
// reading the call's own routes), with its post-call analysis under the list (summary, each criterion's
// verdict and reason, the data extracted, the model; re-run on demand), followed until it arrives. A call
// still in progress streams its events live (the store's events view). docs/api.md, "The console".

import { agentPath, callPath, json } from '../lib/api.js';
import { CALL_CHANNELS, ENDED_REASONS } from '../lib/live-contracts.js';
import { store } from '../store/store.js';
import { $, el, setStatus, showError, time } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * The API's own shapes (packages/client/src/schema.ts, made from the contracts), for the checker only.
 * @typedef {import('../../../../packages/client/src/schema.ts').operations} Ops
 * @typedef {Ops['callsList']['responses'][200]['content']['application/json']} CallList
 * @typedef {CallList['calls'][number]} CallSummary
 * @typedef {NonNullable<CallSummary['analysis']>} Analysis
 */

/**
 * How often a call's analysis is asked for while it is awaited (after the call ends, after a re-run), and for
 * how long at most: the analysis' own retries (at once, after 5 s, after 30 s) end within it.
 */
const ANALYSIS_POLL_MS = 1000;
const ANALYSIS_WAIT_MS = 60_000;
const VERDICTS = ['passed', 'failed', 'unknown'];
/** The agent's analysis settings, as the Analysis panel last loaded or saved them. */
let analysisOn = false;

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
    ['calls-success', 'success'],
    ['calls-criterion', 'criterion'],
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

/** An analysis in a word: its success, or why there is none. @param {CallSummary['analysis']} a */
function resultOf(a) {
  if (!a) return '';
  if ('skipped' in a) return 'too short to judge';
  if ('failed' in a) return 'analysis failed';
  if (a.success === null) return 'not decided';
  return a.success ? 'succeeded' : 'failed';
}

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
      'data-result': resultOf(c.analysis),
    },
    el('span', { class: 'when' }, `${time(c.startedAt)} · ${callerOf(c)}`),
    el(
      'span',
      { class: 'what' },
      `v${c.version} · #${c.deployNumber} · ${seconds(c.durationMs)} · ${endOf(c)}` +
        (p50 === undefined ? '' : ` · response p50 ${Math.round(p50)} ms`) +
        (c.analysis ? ` · ${resultOf(c.analysis)}` : ''),
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

// ---- the call's analysis ------------------------------------------------------------------------------

/** The call whose analysis is shown ('' for none), and the work that follows it (aborted with the view). */
let shownCall = '';

/** A value extracted, as the builder reads it (null: the call did not say). */
const valueText = (v) =>
  v === null || v === undefined ? '–' : typeof v === 'string' ? v : JSON.stringify(v);

/** @param {CallSummary} c the call's record: its analysis, or what it waits for */
function renderAnalysis(c) {
  const a = c.analysis;
  const box = $('call-analysis');
  box.hidden = false;
  box.dataset.callId = c.id;
  box.dataset.result = resultOf(a);
  box.dataset.status = c.status;
  box.dataset.at = String(a?.at ?? -1);
  $('call-rerun').hidden = c.status === 'active';
  /** @type {(Node | string)[]} */
  const parts = [];
  if (!a)
    parts.push(
      el(
        'p',
        { class: 'muted analysis-result' },
        c.status === 'active'
          ? 'In progress: analysed after it ends.'
          : analysisOn
            ? 'Not analysed yet.'
            : 'Not analysed (analysis is off for this agent).',
      ),
    );
  else if ('skipped' in a)
    parts.push(
      el('p', { class: 'analysis-result' }, 'Too short to judge: the caller never spoke, or barely.'),
    );
  else if ('failed' in a)
    parts.push(
      el(
        'p',
        { class: 'analysis-result failure' },
        `Analysis failed — ${a.failed.code}: ${a.failed.message}`,
      ),
    );
  else {
    const word = resultOf(a);
    parts.push(
      el(
        'p',
        { class: 'analysis-result' },
        el(
          'span',
          { class: `verdict verdict-${a.success === null ? 'unknown' : a.success ? 'passed' : 'failed'}` },
          word[0].toUpperCase() + word.slice(1),
        ),
      ),
    );
    if (a.summary !== null) parts.push(el('p', { class: 'analysis-summary' }, a.summary));
    if (a.criteria.length)
      parts.push(
        el(
          'ul',
          { class: 'analysis-criteria' },
          ...a.criteria.map((v) =>
            el(
              'li',
              { 'data-criterion': v.name, 'data-verdict': v.verdict },
              el('span', { class: `verdict verdict-${v.verdict}` }, v.verdict),
              ` ${v.name} — ${v.reason}`,
            ),
          ),
        ),
      );
    const data = Object.entries(a.data);
    if (data.length)
      parts.push(
        el(
          'dl',
          { class: 'analysis-data' },
          ...data.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { 'data-field': k }, valueText(v))]),
        ),
      );
    parts.push(
      el('p', { class: 'muted analysis-model' }, `by ${a.model.provider} ${a.model.model} · ${time(a.at)}`),
    );
  }
  $('call-analysis-body').replaceChildren(...parts);
}

const recordOf = (agentId, callId, signal) => json('GET', callPath(agentId, callId), undefined, { signal });

/**
 * The call's record shown, then followed while its analysis is awaited: a newer one than `after` (epoch ms,
 * a re-run), or the first once the call has ended with analysis on. A call going on is not polled: its live
 * events say when it ends (`ended`), and that follows it again.
 */
async function followAnalysis(agentId, callId, after = -1, ending = false) {
  const signal = store.signal;
  const until = Date.now() + ANALYSIS_WAIT_MS;
  try {
    for (;;) {
      /** @type {CallSummary} */
      const c = await recordOf(agentId, callId, signal);
      if (signal.aborted || shownCall !== callId) return;
      renderAnalysis(c);
      const fresh = c.analysis !== null && c.analysis.at > after;
      // `ending`: its end event came; its record closes a moment later
      const awaited =
        c.status === 'active' ? ending : after >= 0 ? !fresh : c.analysis === null && analysisOn;
      if (!awaited || Date.now() > until) return;
      await new Promise((r) => setTimeout(r, ANALYSIS_POLL_MS));
      if (signal.aborted) return;
    }
  } catch (err) {
    showError(err, 'Loading the call');
  }
}

/** Analyse the call shown again, with the settings as they are now (after changing the criteria). */
async function rerun() {
  const s = store.session;
  if (!s || s.kind !== 'call') return;
  const before = Number($('call-analysis').dataset.at ?? -1);
  try {
    await json('POST', `${callPath(s.agentId, s.sessionId)}/analysis`, {}, { signal: store.signal });
    setStatus(`Call ${s.sessionId}: analysing again`);
    $('call-analysis-body').prepend(el('p', { class: 'muted analysis-pending' }, 'Analysing again…'));
    await followAnalysis(s.agentId, s.sessionId, Math.max(before, 0));
    if (store.session?.sessionId === s.sessionId) setStatus(`Call ${s.sessionId}: analysed again`);
  } catch (err) {
    showError(err, 'Re-running the analysis');
  }
}

/** The criterion filter's choices: each criterion of the settings with each verdict. */
function criterionChoices(settings) {
  const chosen = $('calls-criterion').value;
  const names = settings?.criteria.map((c) => c.name) ?? [];
  $('calls-criterion').replaceChildren(
    el('option', { value: '' }, 'any criterion'),
    ...names.flatMap((n) => VERDICTS.map((v) => el('option', { value: `${n}:${v}` }, `${n} ${v}`))),
  );
  if ([...$('calls-criterion').options].some((o) => o.value === chosen)) $('calls-criterion').value = chosen;
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
      el(
        'div',
        { class: 'row filters' },
        select('calls-success', 'Analysis result', [
          ['', 'any result'],
          ['true', 'succeeded'],
          ['false', 'failed'],
        ]),
        select('calls-criterion', 'Criterion verdict', [['', 'any criterion']]),
      ),
      el('ul', { id: 'calls', class: 'session-list calls' }),
      more,
      el(
        'div',
        { id: 'call-analysis', class: 'call-analysis', hidden: '', 'aria-live': 'polite' },
        el(
          'div',
          { class: 'row between' },
          el('h3', {}, 'Analysis'),
          el('button', { type: 'button', id: 'call-rerun', class: 'small' }, 'Re-run analysis'),
        ),
        el('div', { id: 'call-analysis-body' }),
      ),
    );
    store.on('agent', (agent) => {
      nextCursor = '';
      $('calls').replaceChildren();
      deployChoices([]);
      criterionChoices(null);
      analysisOn = false;
      shownCall = '';
      $('call-analysis').hidden = true;
      more.hidden = true;
      if (agent) void loadCalls();
    });
    store.on('deploys', deployChoices);
    store.on('analysis-settings', (settings) => {
      analysisOn = settings.enabled;
      criterionChoices(settings);
    });
    store.on('session', (s) => {
      markShown();
      if (s.kind !== 'call') return;
      shownCall = s.sessionId;
      $('call-analysis-body').replaceChildren();
      void followAnalysis(s.agentId, s.sessionId);
    });
    // a call watched live ended: its analysis follows
    store.on('ended', () => {
      const s = store.session;
      if (s?.kind === 'call' && s.sessionId === shownCall && $('call-analysis').dataset.status === 'active')
        void followAnalysis(s.agentId, s.sessionId, -1, true);
    });
    store.on('reset', () => {
      markShown();
      shownCall = '';
      $('call-analysis').hidden = true;
    });
    $('call-rerun').addEventListener('click', () => void rerun());
    for (const id of [
      'calls-channel',
      'calls-reason',
      'calls-deploy',
      'calls-since',
      'calls-success',
      'calls-criterion',
    ])
      $(id).addEventListener('change', () => void loadCalls());
    refresh.addEventListener('click', () => void loadCalls());
    more.addEventListener('click', () => void loadCalls(true));
  },
});
