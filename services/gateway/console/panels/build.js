// @ts-check
// Building: templates, the flow editor, validate's issues, the keys a flow needs.

import { agentPath, json } from './api.js';
import { loadAgents, pickAgent, resetView } from './console.js';
import { $, el, plural, setStatus, showError } from './dom.js';
import { drawFlow } from './flow-drawing.js';
import { state } from './state.js';

// ---- building: templates, the flow editor, validate ----------------------------------------------

export const edge = (source, target, sourceHandle = 'output', targetHandle = 'in') => ({
  source,
  sourceHandle,
  target,
  targetHandle,
});

/** Runnable starting points (docs/flow-reference.md has every node type and param). */
/**
 * The API's own types (packages/client/src/schema.ts, made from the API document), for the checker only.
 * @typedef {import('../../../packages/client/src/schema.ts').components['schemas']} Schemas
 * @typedef {Schemas['FlowInput']} Flow
 * @typedef {Schemas['FlowValidation']} FlowValidation
 * @typedef {Schemas['FlowIssue']} FlowIssue
 */

/** @type {Record<string, () => Flow>} */
export const TEMPLATES = {
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
export function parseFlow(text) {
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

export async function createAgent() {
  try {
    const choice = $('template').value;
    const flow = choice === 'json' ? parseFlow($('new-json').value) : TEMPLATES[choice]();
    const name = $('new-name').value.trim() || 'New agent';
    const agent = await json('POST', '/api/agents', { name, flow });
    await loadAgents();
    $('agent').value = agent.id;
    resetView();
    await pickAgent(agent.id);
    $('new-agent').open = false;
    $('editor').open = true;
    setStatus(`Agent ${name} created`);
  } catch (err) {
    showError(err, 'Creating the agent');
  }
}

/** Validate's issues: listed, each at its node (or edge), and marked on the drawing. */
/** @param {FlowIssue[]} issues */
export function showIssues(issues) {
  state.issues = new Map();
  for (const i of issues) {
    if (i.nodeId) state.issues.set(i.nodeId, [...(state.issues.get(i.nodeId) ?? []), i.message]);
  }
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

/**
 * @param {Flow} flow
 * @param {'text' | 'voice'} [sessionType] what the flow must be able to run as
 * @returns {Promise<FlowValidation>}
 */
export async function validateFlow(flow, sessionType = 'text') {
  return json('POST', '/api/flows/validate', { ...flow, sessionType });
}

export async function validateEditor() {
  try {
    const flow = parseFlow($('flow-json').value);
    const v = await validateFlow(flow);
    showIssues(v.issues);
    if (v.issues.length === 0) {
      $('issues').replaceChildren(el('li', { class: 'ok' }, 'No issues: the flow can run.'));
    }
    if (!state.session) drawFlow(flow);
    return v;
  } catch (err) {
    showError(err, 'Validating');
    return undefined;
  }
}

export async function saveEditor() {
  if (!state.agentId) return;
  try {
    const flow = parseFlow($('flow-json').value);
    const agent = await json('PATCH', agentPath(state.agentId), { flow });
    setStatus(`Saved as version ${agent.version}`);
    resetView();
    await pickAgent(state.agentId);
  } catch (err) {
    showError(err, 'Saving the flow');
  }
}

/**
 * Before a start: validate's issues, and the keys the flow needs that the box does not hold, asked for
 * here rather than by a failed start.
 * @param {Flow} flow
 * @param {Record<string, string> | undefined} apiKeys
 * @param {'text' | 'voice'} [sessionType]
 */
export async function readyToRun(flow, apiKeys, sessionType = 'text') {
  const v = await validateFlow(flow, sessionType);
  showIssues(v.issues);
  if (v.issues.length > 0) {
    drawFlow(flow);
    $('editor').open = true;
    setStatus(`The flow cannot run: ${plural(v.issues.length, 'issue')} (see Edit the flow)`, true);
    return false;
  }
  const missing = v.requirements.filter((r) => r.key === 'request' && !apiKeys?.[r.provider]);
  if (missing.length === 0) return true;
  const names = missing.map((r) => r.provider);
  $('needs').textContent =
    `This flow needs a key for ${names.join(', ')} (the server has none it may use there): ` +
    `add ${names.map((n) => `${n}=…`).join(', ')} to the provider keys.`;
  $('needs').hidden = false;
  $('keys-box').open = true;
  $('keys').focus();
  setStatus(`A key is needed for ${names.join(', ')}`, true);
  return false;
}
