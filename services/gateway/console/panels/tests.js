// @ts-check
// Tests: the agent's cases, runs with their verdicts, each attempt's session; the session on screen added as
// a case.

import { agentPath, enc, json } from '../lib/api.js';
import { store } from '../store/store.js';
import { $, el, plural, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';
import { keysOf } from '../ui/run-form.js';

/** How often a run is asked for while it runs (docs/api.md, the console). */
const RUN_POLL_MS = 500;
const pct = (r) => (r === null || r === undefined ? '–' : `${Math.round(r * 100)} %`);

/** The attempts' sessions, for the past sessions list to name. @param {TestRun[]} runs */
function rememberAttempts(runs) {
  for (const run of runs) {
    for (const c of run.cases ?? []) {
      for (const r of c.repeats ?? []) {
        const id = r.observed?.sessionId;
        if (id && !store.attempts.has(id)) store.attempts.set(id, { name: c.name, verdict: r.verdict });
      }
    }
  }
  store.emit('attempts');
}

async function loadTests(agentId) {
  const signal = store.agentSignal;
  try {
    const [cases, runs] = await Promise.all([
      json('GET', `${agentPath(agentId)}/test-cases`, undefined, { signal }),
      json('GET', `${agentPath(agentId)}/test-runs`, undefined, { signal }),
    ]);
    rememberAttempts(runs);
    $('cases').replaceChildren(
      ...cases.map((c) =>
        el(
          'li',
          { 'data-case-id': c.id },
          c.name,
          el('span', { class: 'muted' }, ` · ${c.simulation ? 'simulated' : plural(c.turns.length, 'turn')}`),
        ),
      ),
    );
    if (cases.length === 0) $('cases').replaceChildren(el('li', { class: 'muted' }, 'No test cases yet.'));
    if (runs[0]) renderRun(runs[0]);
  } catch (err) {
    showError(err, 'Loading the tests');
  }
}

/**
 * @typedef {import('../../../../packages/client/src/schema.ts').operations['testRunsGet']['responses'][200]['content']['application/json']} TestRun
 * @param {TestRun} run
 */
function renderRun(run) {
  const c = run.counts;
  const head = el(
    'p',
    { class: `run-head verdict-${run.status}` },
    `Run of v${run.version}: ${run.status} · ${c.passed}/${c.total} passed`,
    c.failed ? ` · ${c.failed} failed` : '',
    c.errored ? ` · ${c.errored} errored` : '',
  );
  const cases = run.cases.map((k) => {
    const attempts = (k.repeats ?? []).map((r) => {
      const id = r.observed?.sessionId;
      const button = el(
        'button',
        { type: 'button', class: `small attempt verdict-${r.verdict}`, 'data-session-id': id ?? '' },
        `attempt ${r.index + 1}: ${r.verdict}`,
      );
      if (!id) button.disabled = true;
      else {
        button.addEventListener(
          'click',
          () => void store.open({ id, agentId: run.agentId, sessionType: 'test', version: run.version }),
        );
      }
      return button;
    });
    return el(
      'li',
      { class: 'run-case', 'data-case-id': k.caseId },
      el('span', { class: `verdict verdict-${k.verdict}` }, k.verdict),
      ` ${k.name} · pass rate ${pct(k.passRate)}`,
      ...(k.failures ?? []).map((f) => el('p', { class: 'failure' }, f.message)),
      ...(k.error ? [el('p', { class: 'failure' }, k.error)] : []),
      el('div', { class: 'attempts' }, ...attempts),
    );
  });
  $('run').replaceChildren(head, el('ul', { class: 'run-cases' }, ...cases));
}

/** Starts a run of the agent's cases, and shows it until it finishes (or another agent is chosen). */
async function runTests() {
  const agentId = store.agentId;
  if (!agentId) return;
  const signal = store.agentSignal;
  $('run-tests').disabled = true;
  try {
    const apiKeys = keysOf();
    let run = await json('POST', `${agentPath(agentId)}/test-runs`, apiKeys ? { apiKeys } : {}, { signal });
    setStatus(`Test run ${run.id} started`);
    while (run.status === 'queued' || run.status === 'running') {
      renderRun(run);
      await new Promise((r) => setTimeout(r, RUN_POLL_MS));
      run = await json('GET', `${agentPath(agentId)}/test-runs/${enc(run.id)}`, undefined, { signal });
    }
    rememberAttempts([run]);
    renderRun(run);
    setStatus(`Test run ${run.status}`, run.status !== 'passed');
    store.emit('sessions');
  } catch (err) {
    showError(err, 'Running the tests');
  } finally {
    $('run-tests').disabled = false;
  }
}

/** The session shown, replayed as a test case: its user turns, and the step path it took as expected. */
async function addCase() {
  const s = store.session;
  if (!s) return;
  try {
    const c = await json('POST', `${agentPath(s.agentId)}/test-cases`, {
      fromSession: s.sessionId,
      name: `Replay of ${s.sessionId.slice(0, 8)}`,
    });
    setStatus(`Test case "${c.name}" added`);
    await loadTests(s.agentId);
  } catch (err) {
    showError(err, 'Adding the test case');
  }
}

definePanel({
  name: 'tests',
  title: 'Tests',
  mount(section, heading) {
    const runButton = el('button', { type: 'button', id: 'run-tests', class: 'small' }, 'Run tests');
    section.append(
      el('div', { class: 'row between' }, heading, runButton),
      el('ul', { id: 'cases', class: 'cases' }),
      el('div', { id: 'run', class: 'run', 'aria-live': 'polite' }),
    );
    store.on('agent', (agent) => {
      $('cases').replaceChildren();
      $('run').replaceChildren();
      if (agent) void loadTests(agent.id);
    });
    // the session on screen can become a case (the button sits beside the conversation's title)
    store.on('reset', () => {
      $('add-case').disabled = true;
    });
    store.on('session', (s) => {
      // a replay case is made from a test session's record; a call is production data, kept apart
      $('add-case').disabled = s.kind === 'call';
    });
    runButton.addEventListener('click', () => void runTests());
    $('add-case').addEventListener('click', () => void addCase());
  },
});
