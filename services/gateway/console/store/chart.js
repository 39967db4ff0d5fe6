// @ts-check
// The latency chart and the version's figures.

import { agentPath, json } from './api.js';
import { $, el, ms, plural, svg } from './dom.js';
import { CHART_FIGURES, CHART_TURNS, state } from './state.js';

// ---- latency chart -------------------------------------------------------------------------------

/** A turn that called no model (a literal greeting) has no latency of the agent's: not charted. */
export const calledModel = (m) =>
  m.llmTtftMs !== undefined || m.llmDurationMs !== undefined || m.e2eLatencyMs !== undefined;

export function addTurn(metrics) {
  if (!calledModel(metrics)) return;
  state.turns.push(metrics);
  drawChart();
}

export function niceMax(v) {
  if (v <= 0) return 100;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
}

export function drawChart() {
  const root = $('chart');
  root.replaceChildren();
  const { width, height } = root.getBoundingClientRect();
  const W = Math.max(width, 200);
  const H = Math.max(height, 100);
  root.setAttribute('viewBox', `0 0 ${W} ${H}`);
  const turns = state.turns.slice(-CHART_TURNS);
  const first = state.turns.length - turns.length;
  const figures = CHART_FIGURES.filter(([k]) => turns.some((t) => t[k] !== undefined));
  $('legend').replaceChildren(...figures.map(([k, label]) => el('span', {}, el('i', { class: k }), label)));
  if (figures.length === 0) {
    root.append(svg('text', { x: 8, y: 20, class: 'empty' }, 'No turn figures yet.'));
    return;
  }
  const left = 44;
  const bottom = H - 18;
  const top = 8;
  // a floor, so a lone fast turn does not fill the axis
  const max = niceMax(Math.max(50, ...turns.flatMap((t) => figures.map(([k]) => t[k] ?? 0))));
  const y = (v) => bottom - ((bottom - top) * v) / max;
  for (const v of [0, max / 2, max]) {
    root.append(svg('line', { class: 'axis', x1: left, x2: W - 4, y1: y(v), y2: y(v) }));
    root.append(svg('text', { x: left - 4, y: y(v) + 3, 'text-anchor': 'end' }, String(Math.round(v))));
  }
  const slot = (W - left - 4) / Math.max(turns.length, 8);
  const barW = Math.max(2, Math.min(18, (slot - 6) / figures.length));
  turns.forEach((t, i) => {
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

export async function showStats(agentId, version, gen) {
  const path = version ? `${agentPath(agentId)}/versions/${version}/stats` : `${agentPath(agentId)}/stats`;
  try {
    const s = await json('GET', path);
    if (gen !== state.gen) return;
    const f = s.figures ?? {};
    const parts = CHART_FIGURES.filter(([k]) => f[k]).map(
      ([k, label]) => `${label} p50 ${ms(f[k].p50)} / p90 ${ms(f[k].p90)}`,
    );
    const scope = version ? `Version ${version}` : 'All versions';
    const counts = `${plural(s.sessions, 'session')}, ${plural(s.turns, 'turn')}`;
    $('stats').textContent = `${scope}: ${counts}${parts.length ? ` · ${parts.join(' · ')}` : ''}`;
  } catch {
    // the figures are a bonus: the session itself is what the page is for
    if (gen === state.gen) $('stats').textContent = '';
  }
}
