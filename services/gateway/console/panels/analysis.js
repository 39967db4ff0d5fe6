// @ts-check
// Analysis: the agent's post-call analysis settings (`GET/PUT …/analysis`): on or off, a summary or not, the
// success criteria (one `name: description` a line), the data fields to extract (one `name (type): description`
// a line) and the analyst model (none: the agent model of the version each call ran). A refused save shows
// each of the API's issues at the line it is about. The Calls panel's criterion filter lists the criteria
// saved here (`analysis-settings`). docs/api.md, "The console".

import { agentPath, call, errorOf, json } from '../lib/api.js';
import { store } from '../store/store.js';
import { $, el, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * The API's own shape (packages/client/src/schema.ts, made from the contracts), for the checker only.
 * @typedef {import('../../../../packages/client/src/schema.ts').operations} Ops
 * @typedef {Ops['analysisSettingsGet']['responses'][200]['content']['application/json']} AnalysisSettings
 * @typedef {AnalysisSettings['dataFields'][number]} DataField
 */

/** @param {AnalysisSettings['criteria']} criteria */
const criteriaText = (criteria) => criteria.map((c) => `${c.name}: ${c.description}`).join('\n');

/** @param {DataField} f */
function fieldLine(f) {
  const type = f.type === 'enum' ? `enum ${(f.options ?? []).join('|')}` : f.type;
  return `${f.name} (${type})${f.description ? `: ${f.description}` : ''}`;
}

const lines = (text) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

/** `name: description`; a line without a colon is its own description (the server judges the name). */
function parseCriteria(text) {
  return lines(text).map((l) => {
    const at = l.indexOf(':');
    return at < 0
      ? { name: l, description: l }
      : { name: l.slice(0, at).trim(), description: l.slice(at + 1).trim() };
  });
}

/** `name (type): description`, the type `string` when none is given, `enum a|b|c` with its options. */
function parseFields(text) {
  return lines(text).map((l) => {
    const m = /^([^\s(:]+)\s*(?:\(([^)]*)\))?\s*(?::\s*(.*))?$/.exec(l);
    if (!m) return { name: l, type: 'string' };
    const [, name, typeText = 'string', description = ''] = m;
    const [type, options] = typeText.trim().split(/\s+/, 2);
    /** @type {Record<string, unknown>} */
    const field = { name, type };
    if (type === 'enum') field.options = (options ?? '').split('|').filter(Boolean);
    if (description) field.description = description;
    return field;
  });
}

/** @param {AnalysisSettings} s */
function fill(s) {
  $('analysis-enabled').checked = s.enabled;
  $('analysis-summary').checked = s.summary;
  $('analysis-criteria').value = criteriaText(s.criteria);
  $('analysis-fields').value = s.dataFields.map(fieldLine).join('\n');
  $('analysis-provider').value = s.model?.provider ?? '';
  $('analysis-model').value = s.model?.model ?? '';
}

/** @returns {AnalysisSettings} the form's settings */
function ofForm() {
  const provider = $('analysis-provider').value.trim();
  const model = $('analysis-model').value.trim();
  return /** @type {AnalysisSettings} */ ({
    enabled: $('analysis-enabled').checked,
    summary: $('analysis-summary').checked,
    criteria: parseCriteria($('analysis-criteria').value),
    dataFields: parseFields($('analysis-fields').value),
    model: provider ? { provider, ...(model ? { model } : {}) } : null,
  });
}

/** Where an issue's path points, in the form's words: `criteria.1.name` → criteria, line 2 (name). */
function whereOf(path) {
  const parts = String(path ?? '')
    .replace(/^\/?body[./]?/, '')
    .split(/[./]/)
    .filter(Boolean);
  const [box, index, ...rest] = parts;
  const name = { criteria: 'Criteria', dataFields: 'Data fields', model: 'Model' }[box] ?? box ?? '';
  if (index !== undefined && /^\d+$/.test(index))
    return `${name}, line ${Number(index) + 1}${rest.length ? ` (${rest.join('.')})` : ''}`;
  return [name, index, ...rest].filter(Boolean).join(' ');
}

function showIssues(issues) {
  const box = $('analysis-error');
  box.replaceChildren(...issues.map((i) => el('li', {}, `${i.where ? `${i.where}: ` : ''}${i.message}`)));
  box.hidden = issues.length === 0;
}

async function load(agentId) {
  /** @type {AnalysisSettings} */
  const s = await json('GET', `${agentPath(agentId)}/analysis`, undefined, { signal: store.agentSignal });
  fill(s);
  store.emit('analysis-settings', s);
}

async function save(event) {
  event.preventDefault();
  const agentId = store.agentId;
  if (!agentId) return;
  showIssues([]);
  try {
    const res = await call('PUT', `${agentPath(agentId)}/analysis`, ofForm(), { signal: store.agentSignal });
    if (res.status === 400) {
      // each issue at its line: "invalid body" alone would not say which criterion to fix
      const body = await res.json().catch(() => ({}));
      const issues = Array.isArray(body.issues) ? body.issues : [];
      showIssues(
        issues.length
          ? issues.map((i) => ({ where: whereOf(i.path), message: String(i.message) }))
          : [{ where: '', message: String(body.message ?? 'refused') }],
      );
      setStatus('Saving the analysis settings failed — see the Analysis panel', true);
      return;
    }
    if (!res.ok) throw await errorOf(res);
    /** @type {AnalysisSettings} */
    const saved = await res.json();
    fill(saved);
    store.emit('analysis-settings', saved);
    setStatus(
      saved.enabled
        ? 'Analysis settings saved: calls ending from now on are analysed with them'
        : 'Analysis settings saved: calls are not analysed',
    );
  } catch (err) {
    showError(err, 'Saving the analysis settings');
  }
}

const check = (id, label) =>
  el('label', { for: id, class: 'check' }, el('input', { id, type: 'checkbox' }), ` ${label}`);

definePanel({
  name: 'analysis',
  title: 'Call analysis',
  mount(section, heading) {
    const form = el(
      'form',
      { id: 'analysis-form', class: 'analysis-form' },
      el(
        'div',
        { class: 'row' },
        check('analysis-enabled', 'Analyse every call'),
        check('analysis-summary', 'Summary'),
      ),
      el('label', { for: 'analysis-criteria' }, 'Success criteria (one a line: name: what passes)'),
      el('textarea', {
        id: 'analysis-criteria',
        rows: '3',
        spellcheck: 'false',
        placeholder: 'booked: The caller got the appointment they asked for.',
      }),
      el('label', { for: 'analysis-fields' }, 'Data to extract (one a line: name (type): description)'),
      el('textarea', {
        id: 'analysis-fields',
        rows: '3',
        spellcheck: 'false',
        placeholder:
          "caller_name (string): The caller's name\nreason (enum booking|question): Why they called",
      }),
      el(
        'div',
        { class: 'row' },
        el('input', {
          id: 'analysis-provider',
          type: 'text',
          'aria-label': 'Analyst provider',
          placeholder: 'provider (empty: the agent model)',
        }),
        el('input', {
          id: 'analysis-model',
          type: 'text',
          'aria-label': 'Analyst model',
          placeholder: 'model',
        }),
      ),
      el('ul', { id: 'analysis-error', class: 'failure issues', role: 'alert', hidden: '' }),
      el('button', { type: 'submit', class: 'small' }, 'Save analysis settings'),
    );
    section.append(heading, form);
    store.on('agent', (agent) => {
      showIssues([]);
      form.hidden = !agent;
      if (agent) load(agent.id).catch((err) => showError(err, 'Loading the analysis settings'));
    });
    form.addEventListener('submit', (e) => void save(e));
  },
});
