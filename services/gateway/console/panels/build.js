// @ts-check
// Build: a new agent from a template or pasted JSON, the chosen agent's flow as JSON with validate's issues
// listed at their nodes, and a save as a new version.

import { agentPath, json, validateFlow } from '../lib/api.js';
import { store } from '../store/store.js';
import { $, el, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * @typedef {import('../lib/api.js').Flow} Flow
 * @typedef {import('../lib/api.js').FlowIssue} FlowIssue
 */

const edge = (source, target, sourceHandle = 'output', targetHandle = 'in') => ({
  source,
  sourceHandle,
  target,
  targetHandle,
});

/**
 * Runnable starting points (docs/flow-reference.md has every node type and param).
 * @type {Record<string, () => Flow>}
 */
const TEMPLATES = {
  greeter: () => ({
    nodes: [
      {
        id: 'agent',
        nodeType: 'agent',
        name: 'Assistant',
        instructions: 'Be brief and kind.',
        language: 'en',
      },
      { id: 'llm', nodeType: 'llm', provider: 'openai', model: 'gpt-4o-mini' },
      { id: 'tts', nodeType: 'tts', provider: 'elevenlabs' },
      { id: 'stt', nodeType: 'stt', provider: 'deepgram' },
      { id: 'start', nodeType: 'start', command: 'Hello! How can I help?', isLiteral: true },
      { id: 'burst', nodeType: 'burst', command: 'Help with the question.', rounds: 1 },
      { id: 'end', nodeType: 'end', command: 'Thank you, goodbye!', isLiteral: true },
    ],
    edges: [
      edge('llm', 'agent', 'output', 'llm_in'),
      edge('tts', 'agent', 'output', 'tts_in'),
      edge('stt', 'agent', 'output', 'stt_in'),
      edge('agent', 'start'),
      edge('start', 'burst'),
      edge('burst', 'end'),
    ],
  }),
  branch: () => {
    const f = TEMPLATES.greeter();
    f.nodes.push({ id: 'check', nodeType: 'ifelse', conditionText: 'The question has been answered.' });
    f.edges = f.edges.filter((e) => e.source !== 'burst');
    f.edges.push(edge('burst', 'check'), edge('check', 'end', 'true'), edge('check', 'burst', 'false'));
    return f;
  },
};

/** A flow from pasted JSON: a flow, or an agent holding one. */
function parseFlow(text) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new Error(`the flow is not JSON (${err.message})`);
  }
  const flow = v && typeof v === 'object' && v.flow ? v.flow : v;
  if (!flow || !Array.isArray(flow.nodes) || !Array.isArray(flow.edges)) {
    throw new Error('the flow needs `nodes` and `edges` lists');
  }
  return flow;
}

/** The panel's controls (ids the page's tests and docs name). */
function markup() {
  const textarea = (id, rows) => el('textarea', { id, rows: String(rows), spellcheck: 'false' });
  return [
    el(
      'details',
      { id: 'new-agent' },
      el('summary', {}, 'New agent'),
      el('label', { for: 'new-name' }, 'Name'),
      el('input', { id: 'new-name', type: 'text', maxlength: '200', autocomplete: 'off' }),
      el('label', { for: 'template' }, 'From'),
      el(
        'select',
        { id: 'template' },
        el('option', { value: 'greeter' }, 'Template: greeting, one exchange, goodbye'),
        el('option', { value: 'branch' }, 'Template: greeting, a yes/no branch, goodbye'),
        el('option', { value: 'json' }, 'The flow JSON pasted below'),
      ),
      el('label', { for: 'new-json' }, 'Flow JSON (for pasted JSON)'),
      textarea('new-json', 3),
      el('div', { class: 'row' }, el('button', { type: 'button', id: 'create' }, 'Create')),
    ),
    el(
      'details',
      { id: 'editor' },
      el('summary', {}, 'Edit the flow (JSON)'),
      el('label', { for: 'flow-json' }, 'Flow of the chosen agent'),
      textarea('flow-json', 12),
      el(
        'div',
        { class: 'row' },
        el('button', { type: 'button', id: 'validate' }, 'Validate'),
        el('button', { type: 'button', id: 'save' }, 'Save as new version'),
      ),
      el('ul', { id: 'issues', class: 'issues', 'aria-live': 'polite' }),
    ),
  ];
}

async function createAgent() {
  try {
    const choice = $('template').value;
    const flow = choice === 'json' ? parseFlow($('new-json').value) : TEMPLATES[choice]();
    const name = $('new-name').value.trim() || 'New agent';
    const agent = await json('POST', '/api/agents', { name, flow });
    await store.loadAgents();
    store.reset();
    await store.chooseAgent(agent.id);
    $('new-agent').open = false;
    $('editor').open = true;
    setStatus(`Agent ${name} created`);
  } catch (err) {
    showError(err, 'Creating the agent');
  }
}

/** Validate's issues: listed, each at its node (or edge); the flow view marks them on the drawing. */
/** @param {FlowIssue[]} issues */
function showIssues(issues) {
  $('issues').replaceChildren(
    ...issues.map((i) => {
      const where = i.nodeId ?? (i.edgeIndex !== undefined ? `edge ${i.edgeIndex + 1}` : 'flow');
      return el(
        'li',
        { class: 'issue', 'data-node-id': i.nodeId ?? '', 'data-code': i.code },
        el('strong', {}, where),
        ` ${i.message} `,
        el('span', { class: 'muted' }, i.code),
      );
    }),
  );
}

async function validateEditor() {
  try {
    const flow = parseFlow($('flow-json').value);
    const v = await validateFlow(flow);
    store.setIssues(v.issues);
    if (v.issues.length === 0) {
      $('issues').replaceChildren(el('li', { class: 'ok' }, 'No issues: the flow can run.'));
    }
    if (!store.session) store.setFlow(flow);
  } catch (err) {
    showError(err, 'Validating');
  }
}

async function saveEditor() {
  const agentId = store.agentId;
  if (!agentId) return;
  try {
    const flow = parseFlow($('flow-json').value);
    const agent = await json('PATCH', agentPath(agentId), { flow });
    setStatus(`Saved as version ${agent.version}`);
    store.reset();
    await store.chooseAgent(agentId);
  } catch (err) {
    showError(err, 'Saving the flow');
  }
}

definePanel({
  name: 'build',
  title: 'Build',
  mount(section, heading) {
    section.append(heading, ...markup());
    store.on('agent', (agent) => {
      if (agent) $('flow-json').value = JSON.stringify(agent.flow, null, 2);
    });
    store.on('issues', ({ issues, blocking }) => {
      showIssues(issues);
      if (blocking) $('editor').open = true;
    });
    $('create').addEventListener('click', () => void createAgent());
    $('validate').addEventListener('click', () => void validateEditor());
    $('save').addEventListener('click', () => void saveEditor());
  },
});
