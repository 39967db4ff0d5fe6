// @ts-check
// The latency chart, the version's figures and the session's usage.

import { agentPath, json } from '../lib/api.js';
import { $, el, ms, plural, svg } from '../ui/dom.js';
import { store } from './store.js';

/** The figures the chart draws, in the order of METRIC_NAMES (packages/contracts/src/metrics.ts). */
const CHART_FIGURES = [
  ['e2eLatencyMs', 'End-to-end (voice)'],
  ['llmTtftMs', 'LLM first token'],
  ['turnMs', 'Whole turn'],
];
const CHART_TURNS = 30;

/** The session's turns' figures, in order. */
let turns = [];

export function mount() {
  store.on('reset', () => {
    turns = [];
    $('stats').textContent = '';
    $('usage').textContent = '';
    drawChart();
  });
  store.on('event', (ev) => {
    if (ev.type === 'turn_metrics') addTurn(ev.metrics);
    else if (ev.type === 'usage') showUsage(ev);
  });
  store.on('turn', addTurn);
  // the figures of the version on screen: a session's, or the chosen agent's latest before any session
  store.on('session', (s) => void showStats(s.agentId, s.version ?? undefined));
  store.on(
    'stats',
    () => store.session && void showStats(store.session.agentId, store.session.version ?? undefined),
  );
  store.on('agent', (agent) => agent && !store.session && void showStats(agent.id, agent.version));
  new ResizeObserver(() => drawChart()).observe($('chart'));
}

function showUsage(ev) {
  const parts = ev.usage.map((u) => {
    if (u.kind === 'llm')
      return `${u.model}: ${u.promptTokens ?? 0} in / ${u.completionTokens ?? 0} out tokens`;
    if (u.kind === 'tts') return `${u.model}: ${u.ttsCharacters ?? 0} characters`;
    return `${u.model}: ${u.sttAudioSeconds ?? 0} s of audio`;
  });
  $('usage').textContent = parts.length ? `Usage: ${parts.join(' · ')}` : '';
}

// ---- latency chart -------------------------------------------------------------------------------

/** A turn that called no model (a literal greeting) has no latency of the agent's: not charted. */
export const calledModel = (m) =>
  m.llmTtftMs !== undefined || m.llmDurationMs !== undefined || m.e2eLatencyMs !== undefined;

function addTurn(metrics) {
  if (!calledModel(metrics)) return;
  turns.push(metrics);
  drawChart();
}

export function niceMax(v) {
  if (v <= 0) return 100;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function drawChart() {
  const root = $('chart');
  root.replaceChildren();
  const { width, height } = root.getBoundingClientRect();
  const W = Math.max(width, 200);
  const H = Math.max(height, 100);
  root.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const shown = turns.slice(-CHART_TURNS);
  const first = turns.length - shown.length;
  const figures = CHART_FIGURES.filter(([k]) => shown.some((t) => t[k] !== undefined));
  $('legend').replaceChildren(...figures.map(([k, label]) => el('span', {}, el('i', { class: k }), label)));
  if (figures.length === 0) {
    root.append(svg('text', { x: 8, y: 20, class: 'empty' }, 'No turn figures yet.'));
    return;
  }
  const left = 44;
  const bottom = H - 18;
  const top = 8;
  // a floor, so a lone fast turn does not fill the axis
  const max = niceMax(Math.max(50, ...shown.flatMap((t) => figures.map(([k]) => t[k] ?? 0))));
  const y = (v) => bottom - ((bottom - top) * v) / max;
  for (const v of [0, max / 2, max]) {
    root.append(svg('line', { class: 'axis', x1: left, x2: W - 4, y1: y(v), y2: y(v) }));
    root.append(svg('text', { x: left - 4, y: y(v) + 3, 'text-anchor': 'end' }, String(Math.round(v))));
  }
  const slot = (W - left - 4) / Math.max(shown.length, 8);
  const barW = Math.max(2, Math.min(18, (slot - 6) / figures.length));
  shown.forEach((t, i) => {
    const x0 = left + i * slot + (slot - barW * figures.length) / 2;
    figures.forEach(([k, label], j) => {
      if (t[k] === undefined) return;
      const bar = svg('rect', {
        class: `bar bar-${k}`,
        'data-turn': first + i + 1,
        x: x0 + j * barW,
        y: y(t[k]),
        width: barW - 1,
        height: Math.max(1, bottom - y(t[k])),
      });
      bar.append(svg('title', {}, `Turn ${first + i + 1}: ${label} ${ms(t[k])}`));
      root.append(bar);
      // the figure itself over its bar, while the bars are wide enough to carry it
      if (barW >= 16) {
        const cx = x0 + j * barW + barW / 2;
        root.append(
          svg('text', { x: cx, y: y(t[k]) - 3, 'text-anchor': 'middle' }, String(Math.round(t[k]))),
        );
      }
    });
    root.append(
      svg(
        'text',
        { x: left + i * slot + slot / 2, y: H - 4, 'text-anchor': 'middle' },
        String(first + i + 1),
      ),
    );
  });
}

/** The version's figures (all versions' for a draft), for the view on screen. */
async function showStats(agentId, version) {
  const path = version ? `${agentPath(agentId)}/versions/${version}/stats` : `${agentPath(agentId)}/stats`;
  const signal = store.signal;
  try {
    const s = await json('GET', path, undefined, { signal });
    const f = s.figures ?? {};
    const parts = CHART_FIGURES.filter(([k]) => f[k]).map(
      ([k, label]) => `${label} p50 ${ms(f[k].p50)} / p90 ${ms(f[k].p90)}`,
    );
    const scope = version ? `Version ${version}` : 'All versions';
    const counts = `${plural(s.sessions, 'session')}, ${plural(s.turns, 'turn')}`;
    $('stats').textContent = `${scope}: ${counts}${parts.length ? ` · ${parts.join(' · ')}` : ''}`;
  } catch {
    // the figures are a bonus: the session itself is what the page is for
    if (!signal.aborted) $('stats').textContent = '';
  }
}
