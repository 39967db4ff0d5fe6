// @ts-check
// Text sessions: started from the run controls, typed to in the turn box under the conversation; each turn's
// reply streams in (the turn is sent with Accept: text/event-stream).

import { agentPath, call, enc, errorOf, json, sseMessages } from '../lib/api.js';
import { readyToRun } from '../store/run-check.js';
import { store } from '../store/store.js';
import { $, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';
import { runBody } from '../ui/run-form.js';

/** The turn box: open while a live text session can take a turn. */
function setTurnBox(open) {
  $('turn').disabled = !open;
  $('send').disabled = !open;
}

/**
 * What the turn's answer says that no event showed (a backend that sent none, or a stream that failed).
 * @param {{ replies: number, metrics: boolean }} seen what the events of the turn showed
 */
function applyResult(result, seen) {
  if (seen.replies === 0) for (const r of result.replies) store.message('agent', r);
  if (!seen.metrics && result.metrics) store.turn(result.metrics);
  if (result.stepId) store.step(result.stepId);
  if (result.ended) store.ended();
}

async function startSession() {
  const agentId = $('agent').value;
  if (!agentId) return;
  const signal = store.reset();
  try {
    const { body, version } = runBody(store.agent);
    setStatus('Starting a text session…');
    const flow = await store.flowOf(agentId, body.version, signal);
    if (!(await readyToRun(flow, body.apiKeys, 'text', signal))) return;
    store.setFlow(flow);
    const result = await json('POST', `${agentPath(agentId)}/text-sessions`, body, { signal });
    const session = {
      agentId,
      sessionId: result.sessionId,
      kind: 'text',
      version,
      live: true,
      ended: false,
      end: () => endSession(session),
    };
    const ready = () => {
      if (!session.ended) {
        setTurnBox(true);
        $('turn').focus();
      }
    };
    // the greeting's events come through the stream; without one, the start's answer shows it
    store.on('stream-open', ready, { signal, once: true });
    store.on(
      'stream-failed',
      () => {
        if (store.seen.size === 0) applyResult(result, { replies: 0, metrics: false });
        ready();
      },
      { signal, once: true },
    );
    store.show(session);
    store.step(result.stepId);
    if (result.ended) store.ended();
    setStatus(`Text session ${result.sessionId} started`);
    store.emit('sessions');
  } catch (err) {
    showError(err, 'Starting the session');
  }
}

async function sendTurn(text) {
  const s = store.session;
  if (!s?.live || s.ended || s.kind !== 'text') return;
  const signal = store.signal;
  // what this turn's own events showed: the answer fills in the rest
  const seen = { replies: 0, metrics: false };
  const turn = new AbortController();
  store.on(
    'event',
    (ev) => {
      if (ev.type === 'agent_reply') seen.replies++;
      else if (ev.type === 'turn_metrics') seen.metrics = true;
    },
    { signal: turn.signal },
  );
  $('send').disabled = true;
  store.sent(text);
  try {
    const res = await call(
      'POST',
      `${agentPath(s.agentId)}/text-sessions/${enc(s.sessionId)}/turns`,
      { text },
      { headers: { accept: 'text/event-stream' }, signal },
    );
    if (!res.ok) throw await errorOf(res);
    if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      applyResult(await res.json(), seen);
      return;
    }
    for await (const msg of sseMessages(res.body)) {
      const data = JSON.parse(msg.data);
      if (msg.event === 'result') applyResult(data, seen);
      else if (msg.event === 'error' && typeof data.id !== 'number')
        store.note('bad', `Error ${data.code}`, data.message);
      else store.event(data);
    }
    // the version's figures now count this turn
    store.emit('stats');
  } catch (err) {
    showError(err, 'The turn');
  } finally {
    turn.abort();
    if (!signal.aborted && !s.ended) $('send').disabled = false;
  }
}

async function endSession(s) {
  $('end').disabled = true;
  try {
    await json('DELETE', `${agentPath(s.agentId)}/text-sessions/${enc(s.sessionId)}`);
    if (store.session === s) store.ended();
    setStatus(`Text session ${s.sessionId} ended`);
    store.emit('sessions');
  } catch (err) {
    showError(err, 'Ending the session');
    if (store.session === s && !s.ended) $('end').disabled = false;
  }
}

definePanel({
  name: 'text',
  mount() {
    store.on('reset', () => setTurnBox(false));
    store.on('ended', () => setTurnBox(false));
    $('start-form').addEventListener('submit', (e) => {
      e.preventDefault();
      void startSession();
    });
    $('turn-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const input = $('turn');
      const text = input.value.trim();
      if (!text || $('send').disabled) return;
      input.value = '';
      void sendTurn(text);
    });
  },
});
