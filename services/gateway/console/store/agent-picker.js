// @ts-check
// The agent and version pickers of the run controls.

import { $, el } from '../ui/dom.js';
import { store } from './store.js';

export function mount() {
  store.on('agents', (agents) => {
    $('agent').replaceChildren(
      el('option', { value: '' }, agents.length ? 'Choose an agent…' : 'No agents yet'),
      ...agents.map((a) => el('option', { value: a.id }, a.name)),
    );
    $('agent').value = store.agentId;
  });
  store.on('agent', (agent) => {
    const select = $('version');
    select.replaceChildren();
    if (!agent) return;
    $('agent').value = agent.id;
    select.append(
      el('option', { value: 'latest' }, `Latest (version ${agent.version})`),
      el('option', { value: 'draft' }, 'Draft (the stored flow, sent as is)'),
      ...[...store.versions]
        .sort((a, b) => b.version - a.version)
        .map((v) =>
          el(
            'option',
            { value: String(v.version) },
            `Version ${v.version} · ${new Date(v.createdAt).toLocaleString()}`,
          ),
        ),
    );
  });
  $('agent').addEventListener('change', (e) => {
    store.reset();
    store.setFlow(null);
    void store.chooseAgent(e.target.value);
  });
}
