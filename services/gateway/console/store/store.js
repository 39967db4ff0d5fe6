// @ts-check
// The session store: what the page shows now (the chosen agent, the session on screen, the events shown) and
// the one place the views (this folder) and the panels (panels/) meet. Nothing here draws: each view listens
// for what it shows, and a panel says what happened through the methods below.

import { agentPath, json } from '../lib/api.js';
import { plural, setStatus, showError } from '../ui/dom.js';

/**
 * @typedef {object} Session the session on screen
 * @property {string} agentId
 * @property {string} sessionId
 * @property {string} kind `text`, `voice`, or a past session's type
 * @property {number | null | undefined} version undefined/null: a draft
 * @property {boolean} live this page runs it (not a replay)
 * @property {boolean} ended
 * @property {'stream' | 'socket'} [eventsVia] where its events come from (default: its events stream)
 * @property {string} [path] its record's path, under which its `/events` and `/recording` are (default: the
 *   test session's; a call's is `…/calls/<callId>`)
 * @property {() => unknown} [end] ends it (the End button), for a live one
 */

/**
 * What the store tells, by event type (`store.on(type, (detail) => …)`):
 * - `reset`: a new view; whatever the last one showed goes (`store.signal` is its successor's)
 * - `agents` (agents[]): the agent list, loaded
 * - `agent` (agent | null): the chosen agent (null while it loads, or none chosen), with `store.versions`
 * - `session` (Session): a session is on screen, live or replayed
 * - `event` (SessionEvent): one of its events, once per id, whichever stream brought it first
 * - `ended`: the session on screen ended
 * - `note` ({ kind, label, text }): a line for what happened besides the messages
 * - `sent` (text): what the user sent from this page, shown before its event confirms it
 * - `message` ({ role, text, at? }): a message no event brought (a turn's answer, a transcript)
 * - `turn` (metrics): a turn's figures no event brought
 * - `step` (stepId): the current step, where no event said it
 * - `flow` (flow | null): the flow to draw; `issues` ({ issues, blocking }): validate's, at their nodes
 * - `agent-state` (state | null): what the agent does now (a voice session)
 * - `stream-open`, `stream-failed`: the session's events stream opened, or could not be had
 * - `sessions`: the past sessions changed; `attempts`: test-run attempts learned (`store.attempts`)
 * - `stats`: the figures changed (a turn was counted)
 * - `deploys` (deploys[]): the chosen agent's deploys, as last loaded (newest first)
 */
class SessionStore extends EventTarget {
  agentId = '';
  /** @type {any} the chosen agent, with its flow */
  agent = null;
  /** @type {any[]} its versions */
  versions = [];
  /** @type {Session | null} */
  session = null;
  /** The ids of the events shown (each is shown once), and the newest: where a new stream resumes. */
  seen = new Set();
  lastId = 0;
  /** @type {any} the flow drawn */
  flow = null;
  /** Validate's issues by node id (messages). */
  issues = new Map();
  /** Test-run attempts by their session id: { name, verdict } (the past sessions list names them). */
  attempts = new Map();
  #view = new AbortController();
  #agentView = new AbortController();

  /**
   * The view on screen: aborted when another takes its place, and with it whatever it started (requests,
   * streams, timers, a voice session's socket). Answers of an older view never reach the page.
   */
  get signal() {
    return this.#view.signal;
  }

  /** The chosen agent's loads: aborted when another agent is chosen. */
  get agentSignal() {
    return this.#agentView.signal;
  }

  /**
   * @param {string} type
   * @param {unknown} [detail]
   */
  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  /**
   * @param {string} type
   * @param {(detail: any) => void} listener
   * @param {AddEventListenerOptions} [options] e.g. `{ signal: store.signal }`: for this view only
   */
  on(type, listener, options) {
    this.addEventListener(type, (e) => listener(/** @type {CustomEvent} */ (e).detail), options);
  }

  /** A new view: the last one's work is aborted and its views cleared. @returns {AbortSignal} the new one's */
  reset() {
    this.#view.abort();
    this.#view = new AbortController();
    this.session = null;
    this.seen = new Set();
    this.lastId = 0;
    this.emit('reset');
    return this.#view.signal;
  }

  /** @param {Session} session */
  show(session) {
    this.session = session;
    this.emit('session', session);
  }

  /** One event of the session on screen: shown once (ids are per session), whichever stream brought it. */
  event(ev) {
    if (typeof ev.id === 'number') {
      if (this.seen.has(ev.id)) return;
      this.seen.add(ev.id);
      this.lastId = Math.max(this.lastId, ev.id);
    }
    this.emit('event', ev);
    if (ev.type === 'session_ended') this.ended();
  }

  ended() {
    if (!this.session || this.session.ended) return;
    this.session.ended = true;
    this.emit('ended');
  }

  /** @param {string} kind @param {string} label @param {string} text */
  note(kind, label, text) {
    this.emit('note', { kind, label, text });
  }

  /** @param {string} text what the user sent from this page (its `user_turn` event confirms it) */
  sent(text) {
    this.emit('sent', text);
  }

  /** @param {'user' | 'agent'} role @param {string} text @param {number} [at] when it was said (epoch ms) */
  message(role, text, at) {
    this.emit('message', { role, text, at });
  }

  turn(metrics) {
    this.emit('turn', metrics);
  }

  step(stepId) {
    this.emit('step', stepId);
  }

  setFlow(flow) {
    this.flow = flow;
    this.emit('flow', flow);
  }

  /**
   * @param {{ nodeId?: string, message: string }[]} issues
   * @param {boolean} [blocking] they stop a start (the editor opens on them)
   */
  setIssues(issues, blocking = false) {
    this.issues = new Map();
    for (const i of issues) {
      if (i.nodeId) this.issues.set(i.nodeId, [...(this.issues.get(i.nodeId) ?? []), i.message]);
    }
    this.emit('issues', { issues, blocking });
  }

  /** @param {string | null} state */
  agentState(state) {
    this.emit('agent-state', state);
  }

  /** The flow a session runs: a version's, or the agent's stored one. */
  async flowOf(agentId, version, signal = this.signal) {
    if (version)
      return (await json('GET', `${agentPath(agentId)}/versions/${version}`, undefined, { signal })).flow;
    if (this.agent?.id === agentId) return this.agent.flow;
    return (await json('GET', agentPath(agentId), undefined, { signal })).flow;
  }

  /** The agents, for the picker. */
  async loadAgents() {
    try {
      const agents = await json('GET', '/api/agents');
      this.emit('agents', agents);
      setStatus(plural(agents.length, 'agent'));
      return agents;
    } catch (err) {
      showError(err, 'Loading agents');
      return [];
    }
  }

  /** The agent to build, run and test; '' for none. */
  async chooseAgent(agentId) {
    this.#agentView.abort();
    this.#agentView = new AbortController();
    const signal = this.#agentView.signal;
    this.agentId = agentId;
    this.agent = null;
    this.versions = [];
    this.attempts = new Map();
    this.emit('agent', null);
    if (!agentId) return;
    try {
      const [agent, versions] = await Promise.all([
        json('GET', agentPath(agentId), undefined, { signal }),
        json('GET', `${agentPath(agentId)}/versions`, undefined, { signal }),
      ]);
      this.agent = agent;
      this.versions = versions;
      this.setIssues([]);
      this.emit('agent', agent);
      if (!this.session) this.setFlow(agent.flow);
    } catch (err) {
      showError(err, 'Loading the agent');
    }
  }

  /**
   * A past session: its flow (the version it ran) drawn first, as its events name its steps and exits; then
   * the session, whose views replay every event it had (its events stream), its figures and its recording.
   */
  async open(s) {
    const signal = this.reset();
    setStatus(`Replaying ${s.sessionType === 'call' ? 'call' : 'session'} ${s.id}`);
    try {
      this.setFlow(await this.flowOf(s.agentId, s.version ?? undefined, signal));
    } catch (err) {
      showError(err, 'Loading the flow');
    }
    if (signal.aborted) return;
    this.show({
      agentId: s.agentId,
      sessionId: s.id,
      kind: s.sessionType,
      version: s.version,
      live: false,
      ended: false,
      ...(s.path ? { path: s.path } : {}),
    });
  }
}

export const store = new SessionStore();
