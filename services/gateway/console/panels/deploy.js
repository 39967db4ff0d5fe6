// @ts-check
// Deploy: put a version live with its call settings (the deploy pipeline moves it building → live, or failed
// with its issues), roll back by deploying an older version, change the live deploy's settings, the live
// version with its talk page's link and the widget's snippet, and the publishable keys the widget is used with
// (created, listed, revoked); each deploy's figures from its calls, and two deploys side by side with their
// differences; a canary (a share of new calls beside the live deploy) started, promoted by hand, or shown
// rolled back with its rule's reason and both sides' figures. docs/api.md, "The console".

import { agentPath, enc, json } from '../lib/api.js';
import { DEFAULT_DEPLOY_SETTINGS } from '../lib/live-contracts.js';
import { store } from '../store/store.js';
import { $, el, setStatus, showError, time } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * The API's own shapes (packages/client/src/schema.ts, made from the contracts), for the checker only.
 * @typedef {import('../../../../packages/client/src/schema.ts').components['schemas']['DeployRecord']} DeployRecord
 * @typedef {import('../../../../packages/client/src/schema.ts').operations} Ops
 * @typedef {Ops['publicKeysList']['responses'][200]['content']['application/json']} PublicKeyList
 * @typedef {Ops['publicKeysCreate']['responses'][201]['content']['application/json']} CreatedPublicKey
 * @typedef {NonNullable<Ops['deploysCreate']['requestBody']>['content']['application/json']} CreateDeployBody
 * @typedef {Ops['deployStats']['responses'][200]['content']['application/json']} DeployStats
 * @typedef {Pick<DeployRecord, 'maxConcurrentCalls' | 'dailyCallCap' | 'maxCallDurationMs' | 'silenceTimeoutMs' | 'endCallMessage'>} DeploySettings
 */

/** How often a deploy in progress is asked for, and for how long at most (its readiness check's own bound). */
const DEPLOY_POLL_MS = 500;
const DEPLOY_WATCH_MS = 60_000;
/** A deploy on its way: the pipeline has not decided yet. */
const MOVING = new Set(['pending', 'building']);

/** The canary's bounds (the contract's): a share of new calls, and its window in seconds (10 s to 30 days). */
const CANARY_WINDOW_MIN_S = 10;
const CANARY_WINDOW_MAX_S = 30 * 24 * 3600;

/**
 * The settings form's fields: the contract's names, with the unit the form shows (seconds for durations) and
 * whether an empty field means "none" (null: no daily cap, no silence timeout).
 * @type {{ key: keyof DeploySettings, id: string, label: string, scale: number, nullable: boolean, min: number, max: number }[]}
 */
const NUMBER_FIELDS = [
  {
    key: 'maxConcurrentCalls',
    id: 'set-max-concurrent',
    label: 'Calls at once',
    scale: 1,
    nullable: false,
    min: 1,
    max: 1000,
  },
  {
    key: 'dailyCallCap',
    id: 'set-daily-cap',
    label: 'Calls a day (empty: no cap)',
    scale: 1,
    nullable: true,
    min: 1,
    max: 1_000_000,
  },
  {
    key: 'maxCallDurationMs',
    id: 'set-max-duration',
    label: 'Longest call (s)',
    scale: 1000,
    nullable: false,
    min: 10,
    max: 4 * 3600,
  },
  {
    key: 'silenceTimeoutMs',
    id: 'set-silence',
    label: 'End after silence (s; empty: never)',
    scale: 1000,
    nullable: true,
    min: 5,
    max: 3600,
  },
];

/** The page's link and the widget's snippet point at this origin: the gateway that serves the console. */
const pageUrl = (subdomain) => `${window.location.origin}/live/${enc(subdomain)}`;
const snippetOf = (subdomain, key) =>
  `<script src="${window.location.origin}/live/widget.js" data-agent="${subdomain}" ` +
  `data-key="${key ?? '<publishable key>'}" defer></script>`;

/** @type {DeployRecord[]} the deploys as last loaded (newest first) */
let deploys = [];
/** The key last created (shown once, in the snippet), and its id (revoked: it leaves the snippet). */
let newKey = '';
let newKeyId = '';

const liveDeploy = () => deploys.find((d) => d.status === 'live');

/** @param {DeploySettings} s the settings, in a line */
function settingsLine(s) {
  const parts = [
    `${s.maxConcurrentCalls} at once`,
    s.dailyCallCap === null ? 'no daily cap' : `${s.dailyCallCap} a day`,
    `calls up to ${Math.round(s.maxCallDurationMs / 1000)} s`,
    s.silenceTimeoutMs === null
      ? 'no silence timeout'
      : `${Math.round(s.silenceTimeoutMs / 1000)} s of silence ends one`,
  ];
  return parts.join(' · ');
}

/** @param {DeploySettings} s the settings shown in the form (the live deploy's, or the defaults) */
function fillSettings(s) {
  for (const f of NUMBER_FIELDS) {
    const v = s[f.key];
    $(f.id).value = v === null || v === undefined ? '' : String(Number(v) / f.scale);
  }
  $('set-end-message').value = s.endCallMessage;
}

/** @returns {DeploySettings} the form's settings (the browser has checked each field's bounds) */
function settingsOfForm() {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const f of NUMBER_FIELDS) {
    const raw = $(f.id).value.trim();
    out[f.key] =
      raw === '' ? (f.nullable ? null : DEFAULT_DEPLOY_SETTINGS[f.key]) : Math.round(Number(raw) * f.scale);
  }
  out.endCallMessage = $('set-end-message').value;
  return /** @type {DeploySettings} */ (out);
}

/** @param {DeployRecord} d @returns {DeploySettings} */
const settingsOf = (d) => ({
  maxConcurrentCalls: d.maxConcurrentCalls,
  dailyCallCap: d.dailyCallCap,
  maxCallDurationMs: d.maxCallDurationMs,
  silenceTimeoutMs: d.silenceTimeoutMs,
  endCallMessage: d.endCallMessage,
});

function renderLive() {
  const live = liveDeploy();
  const line = $('deploy-live');
  $('deploy-apply').hidden = !live;
  if (!live) {
    line.replaceChildren('Not live: no deploy answers callers.');
    delete line.dataset.version;
    $('widget-snippet').textContent = '';
    $('widget-box').hidden = true;
    return;
  }
  const link = el(
    'a',
    { href: pageUrl(live.subdomain), target: '_blank', rel: 'noopener', id: 'live-link' },
    pageUrl(live.subdomain),
  );
  line.replaceChildren(
    `Live: version ${live.version} (deploy #${live.deployNumber}) · `,
    link,
    el('span', { class: 'muted live-settings' }, ` · ${settingsLine(live)}`),
  );
  line.dataset.version = String(live.version);
  $('widget-snippet').textContent = snippetOf(live.subdomain, newKey || undefined);
  $('widget-box').hidden = false;
}

/** One side of a rollback's figures, as a line: success from judged calls, and the median response. */
function sideLine(name, side) {
  const success =
    side.successRate === null
      ? `${side.judged} judged`
      : `${round(side.successRate * 100)} % success (${side.passed}/${side.judged} judged)`;
  const response =
    side.responseP50Ms === null
      ? `${side.timed} timed`
      : `p50 ${Math.round(side.responseP50Ms)} ms (${side.timed} timed)`;
  return `${name}: ${success} · ${response}`;
}

/** @param {DeployRecord} d what the list says under a canary or a rolled-back deploy */
function canaryLines(d) {
  if (d.status === 'canary')
    return [
      el(
        'span',
        { class: 'traffic' },
        ` · ${d.trafficPercent ?? '?'} % of new calls` +
          (d.canaryWindowMs ? ` · promoted after ${Math.round(d.canaryWindowMs / 1000)} s` : ''),
      ),
    ];
  if (d.status === 'rolled_back' && d.rollback) {
    const r = d.rollback;
    return [
      el(
        'p',
        { class: 'failure rollback-reason' },
        `Rolled back (${r.rule.replaceAll('_', ' ')}): ${r.reason}`,
      ),
      el('p', { class: 'failure rollback-side', 'data-side': 'canary' }, sideLine('canary', r.canary)),
      el('p', { class: 'failure rollback-side', 'data-side': 'live' }, sideLine('live', r.live)),
    ];
  }
  return [];
}

function renderDeploys() {
  const live = liveDeploy();
  $('deploys').replaceChildren(
    ...deploys.slice(0, 8).map((d) => {
      // a failed deploy's reason and the readiness issues a public caller's start would meet
      const failure = d.failure
        ? [
            el('p', { class: 'failure' }, d.failure.reason),
            ...d.failure.issues.map((i) =>
              el('p', { class: 'failure' }, `${i.nodeId ? `${i.nodeId}: ` : ''}${i.message} (${i.code})`),
            ),
          ]
        : [];
      const item = el(
        'li',
        { 'data-deploy-id': d.id, 'data-status': d.status },
        el('span', { class: `verdict verdict-${d.status}` }, d.status.replaceAll('_', ' ')),
        ` #${d.deployNumber} · v${d.version} · ${time(d.updatedAt ?? d.createdAt)}`,
        ...canaryLines(d),
        ...failure,
      );
      const stats = el('button', { type: 'button', class: 'small stats' }, 'Stats');
      stats.addEventListener('click', () => {
        $('stats-a').value = d.id;
        $('stats-b').value = '';
        void showStats();
      });
      item.append(' ', stats);
      if (d.status === 'canary') {
        const promote = el('button', { type: 'button', class: 'small promote' }, 'Promote');
        promote.addEventListener('click', () => void promoteCanary(d));
        item.append(' ', promote);
      }
      // roll back: the version of a deploy that was live before, deployed again (seconds: no new build)
      if (live && d.status === 'superseded' && d.version !== live.version) {
        const back = el('button', { type: 'button', class: 'small rollback' }, `Roll back to v${d.version}`);
        // a rollback changes the version only: the callers' caps stay those of the live deploy
        back.addEventListener('click', () => void deploy(d.version, settingsOf(live)));
        item.append(' ', back);
      }
      return item;
    }),
  );
  if (deploys.length === 0) $('deploys').replaceChildren(el('li', { class: 'muted' }, 'No deploys yet.'));
  statsChoices();
  renderLive();
}

function renderVersions() {
  const versions = [...store.versions].sort((a, b) => b.version - a.version);
  $('deploy-version').replaceChildren(
    ...versions.map((v) => el('option', { value: String(v.version) }, `v${v.version}`)),
  );
  $('deploy').disabled = versions.length === 0;
}

async function loadDeploys(agentId, signal = store.agentSignal) {
  deploys = await json('GET', `${agentPath(agentId)}/deploys`, undefined, { signal });
  renderDeploys();
  // the Calls panel's deploy filter lists them
  store.emit('deploys', deploys);
}

/** The canary made the live deploy for every new call (`POST …/promote`); the previous live one superseded. */
async function promoteCanary(d) {
  const agentId = store.agentId;
  if (!agentId) return;
  try {
    await json('POST', `${agentPath(agentId)}/deploys/${enc(d.id)}/promote`);
    setStatus(`Deploy #${d.deployNumber} of v${d.version}: promoted, live for every new call`);
    await loadDeploys(agentId);
    const live = liveDeploy();
    if (live) fillSettings(live);
  } catch (err) {
    showError(err, 'Promoting the canary');
  }
}

/** @returns {{ trafficPercent?: number, canaryWindowMs?: number }} the canary's fields (empty share: a full deploy) */
function canaryOfForm() {
  const share = $('deploy-traffic').value.trim();
  if (share === '') return {};
  const windowS = $('deploy-window').value.trim();
  return {
    trafficPercent: Number(share),
    ...(windowS === '' ? {} : { canaryWindowMs: Math.round(Number(windowS) * 1000) }),
  };
}

/**
 * Deploys `version` with `settings` (a rollback: an older version with the live deploy's settings) and
 * follows it until the pipeline decides: live, or failed with its readiness issues.
 * @param {number} version
 * @param {DeploySettings} settings
 */
async function deploy(version, settings, canary = {}) {
  const agentId = store.agentId;
  if (!agentId) return;
  const signal = store.agentSignal;
  $('deploy').disabled = true;
  try {
    /** @type {CreateDeployBody} */
    const body = { version, ...settings, ...canary };
    /** @type {DeployRecord} */
    const created = await json('POST', `${agentPath(agentId)}/deploys`, body, { signal });
    setStatus(`Deploy #${created.deployNumber} of v${version}: ${created.status}`);
    const until = Date.now() + DEPLOY_WATCH_MS;
    let current = created;
    while (MOVING.has(current.status) && Date.now() < until) {
      await loadDeploys(agentId, signal);
      current = deploys.find((d) => d.id === created.id) ?? current;
      if (MOVING.has(current.status)) await new Promise((r) => setTimeout(r, DEPLOY_POLL_MS));
    }
    await loadDeploys(agentId, signal);
    current = deploys.find((d) => d.id === created.id) ?? current;
    if (current.status === 'live') fillSettings(current);
    setStatus(
      `Deploy #${current.deployNumber} of v${version}: ${current.status}`,
      current.status === 'failed' || current.status === 'rolled_back',
    );
  } catch (err) {
    showError(err, 'Deploying');
  } finally {
    $('deploy').disabled = false;
  }
}

/** The form's settings on the live deploy (`PATCH`): the next call on every instance has them. */
async function applyToLive() {
  const live = liveDeploy();
  const agentId = store.agentId;
  if (!live || !agentId || !$('deploy-form').reportValidity()) return;
  try {
    await json('PATCH', `${agentPath(agentId)}/deploys/${enc(live.id)}`, settingsOfForm());
    setStatus(`Deploy #${live.deployNumber}: settings changed for its next calls`);
    await loadDeploys(agentId);
  } catch (err) {
    showError(err, 'Changing the settings');
  }
}

// ---- a deploy's figures, and two side by side --------------------------------------------------------

/** The two pickers list every deploy (the second may be none: one deploy's figures alone). */
function statsChoices() {
  for (const [id, none] of [
    ['stats-a', null],
    ['stats-b', 'compare with…'],
  ]) {
    const chosen = $(id).value;
    $(id).replaceChildren(
      ...(none ? [el('option', { value: '' }, none)] : []),
      ...deploys.map((d) =>
        el('option', { value: d.id }, `#${d.deployNumber} · v${d.version} · ${d.status}`),
      ),
    );
    if (deploys.some((d) => d.id === chosen)) $(id).value = chosen;
  }
  $('stats-box').hidden = deploys.length === 0;
}

const round = (v, digits = 1) => Number(v.toFixed(digits));
const signed = (v, unit = '') => `${v > 0 ? '+' : v < 0 ? '−' : '±'}${Math.abs(round(v))}${unit}`;

/** A usage line's measure: tokens for a model, characters for speech, seconds for transcription. */
function usageMeasure(u) {
  if (u.kind === 'llm') return { value: u.promptTokens + u.completionTokens, unit: ' tokens' };
  if (u.kind === 'tts') return { value: u.ttsCharacters, unit: ' chars' };
  return { value: round(u.sttAudioSeconds), unit: ' s' };
}

/**
 * The rows of the table: a name, each deploy's value (number or null), its unit, and which way is better
 * (+1: more is better, −1: less is better, 0: neither).
 * @param {DeployStats[]} all
 */
function statsRows(all) {
  /** @type {{ key: string, label: string, values: (number | null)[], unit: string, better: number }[]} */
  const rows = [];
  const add = (key, label, of, unit = '', better = 0) =>
    rows.push({ key, label, values: all.map(of), unit, better });
  add('calls', 'Calls', (s) => s.calls);
  add('connected', 'Connected', (s) => s.connected);
  add('minutes', 'Minutes', (s) => round(s.minutes));
  add('analysed', 'Analysed', (s) => s.analysed);
  add('passed', 'Passed', (s) => s.passed, '', 1);
  add('failed', 'Failed', (s) => s.failed, '', -1);
  add(
    'successRate',
    'Success rate',
    (s) => (s.successRate === null ? null : round(s.successRate * 100)),
    ' %',
    1,
  );
  for (const p of /** @type {const} */ (['p50', 'p90', 'p99']))
    add(
      `response-${p}`,
      `Response ${p}`,
      (s) => (s.responseMs ? Math.round(s.responseMs[p]) : null),
      ' ms',
      -1,
    );
  const reasons = [...new Set(all.flatMap((s) => Object.keys(s.endedReasons)))].sort();
  for (const r of reasons)
    add(`ended-${r}`, `Ended: ${r.replaceAll('_', ' ')}`, (s) => s.endedReasons[r] ?? 0);
  const usageKey = (u) => `${u.kind} ${u.provider} ${u.model}`;
  const usages = [...new Set(all.flatMap((s) => s.usage.map(usageKey)))].sort();
  for (const k of usages) {
    const unit = usageMeasure(all.flatMap((s) => s.usage).find((u) => usageKey(u) === k)).unit;
    add(
      `usage-${k}`,
      `Usage: ${k}`,
      (s) => {
        const u = s.usage.find((x) => usageKey(x) === k);
        return u ? usageMeasure(u).value : 0;
      },
      unit,
    );
  }
  return rows;
}

/** The deploys picked: each one's figures, and with two the differences (the second against the first). */
async function showStats() {
  const agentId = store.agentId;
  const ids = [$('stats-a').value, $('stats-b').value].filter(Boolean);
  if (!agentId || ids.length === 0) return;
  try {
    /** @type {DeployStats[]} */
    const all = await Promise.all(
      ids.map((id) =>
        json('GET', `${agentPath(agentId)}/deploys/${enc(id)}/stats`, undefined, {
          signal: store.agentSignal,
        }),
      ),
    );
    const two = all.length === 2;
    const head = el(
      'tr',
      {},
      el('th', {}, ''),
      ...all.map((s) => el('th', { scope: 'col' }, `#${s.deployNumber} · v${s.version}`)),
      ...(two ? [el('th', { scope: 'col' }, 'difference')] : []),
    );
    const body = statsRows(all).map((r) => {
      const cells = r.values.map((v) => el('td', {}, v === null ? '–' : `${v}${r.unit}`));
      if (two) {
        const [a, b] = r.values;
        const diff = a === null || b === null ? null : b - a;
        const judged =
          diff === null || diff === 0 || r.better === 0 ? '' : diff * r.better > 0 ? 'better' : 'worse';
        cells.push(
          el(
            'td',
            { class: `diff ${judged}` },
            diff === null ? '–' : signed(diff, r.unit === ' %' ? ' pts' : r.unit),
          ),
        );
      }
      return el('tr', { 'data-row': r.key }, el('th', { scope: 'row' }, r.label), ...cells);
    });
    $('stats-table').replaceChildren(el('thead', {}, head), el('tbody', {}, ...body));
    $('stats-table').hidden = false;
    $('stats-box').open = true;
  } catch (err) {
    showError(err, 'Loading the deploy stats');
  }
}

// ---- publishable keys ---------------------------------------------------------------------------------

async function loadKeys(agentId, signal = store.agentSignal) {
  /** @type {PublicKeyList} */
  const { keys } = await json('GET', `${agentPath(agentId)}/public-keys`, undefined, { signal });
  $('keys-list').replaceChildren(
    ...keys.map((k) => {
      const revoked = k.revokedAt !== null;
      const item = el(
        'li',
        { 'data-key-id': k.id, 'data-revoked': String(revoked) },
        el('code', {}, k.prefix),
        k.label ? ` ${k.label}` : '',
        ` · ${k.allowedOrigins.join(', ')}`,
        revoked ? ` · revoked ${time(k.revokedAt)}` : '',
      );
      if (!revoked) {
        const revoke = el('button', { type: 'button', class: 'small revoke' }, 'Revoke');
        revoke.addEventListener('click', () => void revokeKey(agentId, k.id));
        item.append(' ', revoke);
      }
      return item;
    }),
  );
  if (keys.length === 0) $('keys-list').replaceChildren(el('li', { class: 'muted' }, 'No keys yet.'));
}

async function createKey(event) {
  event.preventDefault();
  const agentId = store.agentId;
  if (!agentId) return;
  const allowedOrigins = $('key-origins')
    .value.split(/[\s,]+/)
    .map((o) => o.trim())
    .filter(Boolean);
  const label = $('key-label').value.trim();
  try {
    /** @type {CreatedPublicKey} */
    const created = await json('POST', `${agentPath(agentId)}/public-keys`, {
      allowedOrigins,
      ...(label ? { label } : {}),
    });
    newKey = created.key;
    newKeyId = created.id;
    // the key is shown once (only its hash is kept): copied from here, or from the snippet
    $('new-key').replaceChildren(
      'New key (copy it now, it is not shown again): ',
      el('code', {}, created.key),
    );
    $('new-key').hidden = false;
    $('key-origins').value = '';
    $('key-label').value = '';
    setStatus(`Publishable key ${created.prefix} created`);
    renderLive();
    await loadKeys(agentId);
  } catch (err) {
    showError(err, 'Creating the key');
  }
}

async function revokeKey(agentId, keyId) {
  try {
    await json('DELETE', `${agentPath(agentId)}/public-keys/${enc(keyId)}`);
    if (keyId === newKeyId) {
      // a revoked key in the snippet would only be copied into a page that cannot call
      newKey = '';
      newKeyId = '';
      $('new-key').hidden = true;
      renderLive();
    }
    setStatus('Publishable key revoked: pages using it can no longer call');
    await loadKeys(agentId);
  } catch (err) {
    showError(err, 'Revoking the key');
  }
}

// ---- the section --------------------------------------------------------------------------------------

function settingsBox() {
  const fields = NUMBER_FIELDS.map((f) =>
    el(
      'label',
      { for: f.id, class: 'setting' },
      f.label,
      el('input', {
        id: f.id,
        type: 'number',
        min: String(f.min),
        max: String(f.max),
        step: '1',
        ...(f.nullable ? {} : { required: '' }),
      }),
    ),
  );
  return el(
    'details',
    { id: 'deploy-settings' },
    el('summary', {}, 'Call settings'),
    ...fields,
    el(
      'label',
      { for: 'set-end-message', class: 'setting' },
      'Goodbye at the longest call (empty: hang up)',
      el('input', { id: 'set-end-message', type: 'text', maxlength: '500' }),
    ),
    el(
      'button',
      { type: 'button', id: 'deploy-apply', class: 'small', hidden: '' },
      'Apply to the live deploy',
    ),
  );
}

definePanel({
  name: 'deploy',
  title: 'Deploy',
  mount(section, heading) {
    const deployButton = el('button', { type: 'submit', id: 'deploy', class: 'small' }, 'Deploy');
    const versionSelect = el('select', { id: 'deploy-version', 'aria-label': 'Version to deploy' });
    // one form: the browser checks the settings' bounds before a deploy goes
    const deployForm = el(
      'form',
      { id: 'deploy-form' },
      el('div', { class: 'row between' }, heading, el('div', { class: 'row' }, versionSelect, deployButton)),
      // a share makes it a canary beside the live deploy; empty, it replaces the live deploy
      el(
        'div',
        { class: 'row canary-fields' },
        el(
          'label',
          { for: 'deploy-traffic', class: 'setting' },
          'Traffic % (optional: a canary)',
          el('input', { id: 'deploy-traffic', type: 'number', min: '1', max: '99', step: '1' }),
        ),
        el(
          'label',
          { for: 'deploy-window', class: 'setting' },
          'Promote after (s; empty: by hand)',
          el('input', {
            id: 'deploy-window',
            type: 'number',
            min: String(CANARY_WINDOW_MIN_S),
            max: String(CANARY_WINDOW_MAX_S),
            step: '1',
          }),
        ),
      ),
      settingsBox(),
    );
    const keyForm = el(
      'form',
      { id: 'key-form', class: 'key-form' },
      el('label', { for: 'key-origins' }, 'Allowed origins (one per line)'),
      el('textarea', {
        id: 'key-origins',
        rows: '2',
        spellcheck: 'false',
        placeholder: 'https://www.example.com',
        required: '',
      }),
      el('label', { for: 'key-label' }, 'Label (optional)'),
      el('input', { id: 'key-label', type: 'text', maxlength: '100' }),
      el('button', { type: 'submit', class: 'small' }, 'Create key'),
    );
    section.append(
      deployForm,
      el('p', { id: 'deploy-live', class: 'deploy-live', 'aria-live': 'polite' }),
      el('ul', { id: 'deploys', class: 'deploys' }),
      el(
        'details',
        { id: 'stats-box', class: 'stats-box', hidden: '' },
        el('summary', {}, 'Stats from calls'),
        el(
          'div',
          { class: 'row filters' },
          el('select', { id: 'stats-a', 'aria-label': 'Deploy' }),
          el('select', { id: 'stats-b', 'aria-label': 'Compare with' }),
          el('button', { type: 'button', id: 'stats-show', class: 'small' }, 'Show'),
        ),
        el('table', { id: 'stats-table', class: 'stats-table', hidden: '' }),
      ),
      el(
        'details',
        { id: 'widget-box', hidden: '' },
        el('summary', {}, 'Widget snippet'),
        el('pre', { class: 'snippet' }, el('code', { id: 'widget-snippet' })),
      ),
      el('h3', {}, 'Publishable keys'),
      el('ul', { id: 'keys-list', class: 'keys-list' }),
      keyForm,
      el('p', { id: 'new-key', class: 'new-key', hidden: '' }),
    );
    store.on('agent', (agent) => {
      deploys = [];
      newKey = '';
      newKeyId = '';
      $('deploys').replaceChildren();
      $('keys-list').replaceChildren();
      $('new-key').hidden = true;
      $('stats-table').replaceChildren();
      $('stats-table').hidden = true;
      statsChoices();
      fillSettings(DEFAULT_DEPLOY_SETTINGS);
      renderVersions();
      renderLive();
      if (!agent) return;
      loadDeploys(agent.id)
        .then(() => {
          // the form starts from what callers have now
          const live = liveDeploy();
          if (live) fillSettings(live);
        })
        .catch((err) => showError(err, 'Loading the deploys'));
      loadKeys(agent.id).catch((err) => showError(err, 'Loading the publishable keys'));
    });
    deployForm.addEventListener('submit', (e) => {
      e.preventDefault();
      void deploy(Number($('deploy-version').value), settingsOfForm(), canaryOfForm());
    });
    $('deploy-apply').addEventListener('click', () => void applyToLive());
    $('stats-show').addEventListener('click', () => void showStats());
    keyForm.addEventListener('submit', (e) => void createKey(e));
  },
});
