// @ts-check
// What the page shows now, and the constants the views share.

export const EVENT_TYPES = [
  'session_started',
  'session_ended',
  'step_entered',
  'agent_state',
  'recording_started',
  'user_turn',
  'agent_reply_delta',
  'agent_reply',
  'tool_called',
  'tool_result',
  'branch_decided',
  'transfer',
  'post_processing',
  'turn_metrics',
  'usage',
];
/** The figures the chart draws, in the order of METRIC_NAMES (packages/contracts/src/metrics.ts). */
export const CHART_FIGURES = [
  ['e2eLatencyMs', 'End-to-end (voice)'],
  ['llmTtftMs', 'LLM first token'],
  ['turnMs', 'Whole turn'],
];
export const CHART_TURNS = 30;
export const STREAM_RETRIES = 5;

export const state = {
  /** Bumped whenever the view changes: answers of an older view are dropped. */
  gen: 0,
  agentId: '',
  agent: null,
  /** { agentId, sessionId, live, ended } of the session shown. */
  session: null,
  stream: null,
  turnAbort: null,
  seen: new Set(),
  lastId: 0,
  replies: new Map(),
  interim: null,
  turns: [],
  step: null,
  nodes: new Map(),
  /** The flow drawn, and the validate issues on its nodes (node id → messages). */
  flow: null,
  issues: new Map(),
  /** Test-run attempts by their session id: { name, verdict } (the past sessions list names them). */
  attempts: new Map(),
  /** When each message began, from the events (timeline.js): what a recording is played against. */
  timeline: { speakingAt: null, unstamped: null, userFirst: null },
  /** The past session's recording shown: its t=0 (epoch ms), its path, and its reads retried (timeline.js). */
  recording: null,
};

/**
 * The provider keys box is kept in sessionStorage: a reload (or a crash of the page) keeps it, but it lives
 * only as long as this tab, is never shared with other tabs and is not left on disk the way localStorage
 * would leave a secret indefinitely.
 */
export const KEYS_KEY = 'vab-console-keys';
export const stored = {
  get: (k) => {
    try {
      return sessionStorage.getItem(k) ?? '';
    } catch {
      return '';
    }
  },
  set: (k, v) => {
    try {
      sessionStorage.setItem(k, v);
    } catch {
      // storage off: the box still works, it is just not kept
    }
  },
};
