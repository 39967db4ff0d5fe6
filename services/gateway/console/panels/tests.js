// @ts-check
// Tests: the agent's cases, runs with their verdicts, and each attempt's session.

import { agentPath, enc, json } from './api.js';
import { keysOf, loadSessions, openSession } from './console.js';
import { $, el, plural, setStatus, showError } from './dom.js';
import { state } from './state.js';

// ---- tests: cases, runs, attempts ----------------------------------------------------------------

export const RUN_POLL_MS = 500;
export const pct = (r) => (r === null || r === undefined ? '–' : `${Math.round(r * 100)} %`);

/** @param {TestRun[]} runs */
export function rememberAttempts(runs) {
  for (const run of runs) {
    for (const c of run.cases ?? []) {
      for (const r of c.repeats ?? []) {
        const id = r.observed?.sessionId;
        if (id && !state.attempts.has(id)) state.attempts.set(id, { name: c.name, verdict: r.verdict });
      }
    }
  }
}

export async function loadTests(agentId) {
  try {
    const [cases, runs] = await Promise.all([
      json('GET', `${agentPath(agentId)}/test-cases`),
      json('GET', `${agentPath(agentId)}/test-runs`),
    ]);
    if (agentId !== state.agentId) return;
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
 * @typedef {import('../../../packages/client/src/schema.ts').operations['testRunsGet']['responses'][200]['content']['application/json']} TestRun
 * @param {TestRun} run
 */
export function renderRun(run) {
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
          () =>
            void openSession({ id, agentId: run.agentId, sessionType: 'test', version: run.version }, button),
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

export async function runTests() {
  const agentId = state.agentId;
  if (!agentId) return;
  $('run-tests').disabled = true;
  try {
    const apiKeys = keysOf();
    let run = await json('POST', `${agentPath(agentId)}/test-runs`, apiKeys ? { apiKeys } : {});
    setStatus(`Test run ${run.id} started`);
    while (run.status === 'queued' || run.status === 'running') {
      renderRun(run);
      await new Promise((r) => setTimeout(r, RUN_POLL_MS));
      if (agentId !== state.agentId) return;
      run = await json('GET', `${agentPath(agentId)}/test-runs/${enc(run.id)}`);
    }
    rememberAttempts([run]);
    renderRun(run);
    setStatus(`Test run ${run.status}`, run.status !== 'passed');
    await loadSessions(agentId);
  } catch (err) {
    showError(err, 'Running the tests');
  } finally {
    $('run-tests').disabled = false;
  }
}

/** The session shown, replayed as a test case: its user turns, and the step path it took as expected. */
export async function addCase() {
  const s = state.session;
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
