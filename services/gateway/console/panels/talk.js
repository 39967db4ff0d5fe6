// @ts-check
// Talk: a voice session with the agent from this page (docs/api.md, "Voice sessions over a WebSocket"). The
// call itself (microphone, socket, playback) is the voice client's, shared with the public talk page and the
// widget (services/gateway/live/voice/voice-call.js); this panel starts and ends the session as a builder
// does (the token, a ticket for the socket) and shows it in the store's views.

import { CALL_AUDIO, VoiceCall } from '../../live/voice/voice-call.js';
import { agentPath, enc, json, ticketFor } from '../lib/api.js';
import { readyToRun } from '../store/run-check.js';
import { store } from '../store/store.js';
import { $, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';
import { runBody } from '../ui/run-form.js';

/**
 * What the page played and sent (the call's figures), for whoever watches it (a test, a curious builder in the
 * devtools): `heardSamples` counts non-silent samples rendered to the audio output (at `outputRate`).
 */
Object.assign(window, { vabTalk: new VoiceCall().figures });

/** Whether a flow can be spoken to: it has a speech-to-text and a text-to-speech node (validate says more). */
const canTalk = (flow) =>
  Boolean(flow?.nodes?.some((n) => n.nodeType === 'stt') && flow?.nodes?.some((n) => n.nodeType === 'tts'));

/** The live talk: its socket and audio graph (one at a time). */
let talk = null;

function showTalk() {
  const button = $('talk');
  const live = Boolean(talk);
  button.hidden = !live && !canTalk(store.agent?.flow);
  button.textContent = live ? 'Stop' : 'Talk';
  button.setAttribute('aria-pressed', String(live));
  button.disabled = live && talk.stopping;
}

async function toggleTalk() {
  if (talk) await stopTalk();
  else await startTalk();
}

async function startTalk() {
  const agentId = $('agent').value;
  if (!agentId || talk) return;
  const signal = store.reset();
  const t = {
    agentId,
    sessionId: '',
    stopping: false,
    call: /** @type {VoiceCall} */ (/** @type {unknown} */ (null)),
  };
  t.call = new VoiceCall(handlersOf(t));
  talk = t;
  Object.assign(window, { vabTalk: t.call.figures });
  // another view ends the talk: the session ends, and its audio goes at once
  signal.addEventListener('abort', () => leaveTalk(t), { once: true });
  showTalk();
  try {
    const { body, version } = runBody(store.agent);
    body.audio = CALL_AUDIO;
    setStatus('Starting a voice session…');
    const flow = await store.flowOf(agentId, body.version, signal);
    if (!(await readyToRun(flow, body.apiKeys, 'voice', signal))) return void t.call.close();
    store.setFlow(flow);
    // the audio first (a microphone refused must not leave a session waiting for a socket)
    await t.call.openAudio();
    signal.throwIfAborted();
    // not aborted with the view: a session started after all is ended (the view that left ends it)
    const started = await json('POST', `${agentPath(agentId)}/voice-sessions`, body);
    t.sessionId = started.sessionId;
    if (signal.aborted) return void endRemote(t);
    store.show({
      agentId,
      sessionId: started.sessionId,
      kind: 'voice',
      version,
      live: true,
      ended: false,
      eventsVia: 'socket',
      end: () => stopTalk(),
    });
    // a ticket when tokens are on (a browser cannot put a header on a WebSocket)
    const ticket = await ticketFor(started.audioPath);
    if (talk !== t) return;
    const url = new URL(started.audioPath, window.location.href);
    if (ticket) url.searchParams.set('ticket', ticket);
    t.call.connect(url, started.audio);
    store.emit('sessions');
  } catch (err) {
    showError(err, 'Talking');
    if (talk === t && !signal.aborted) {
      if (t.sessionId) void endRemote(t);
      t.call.close();
    }
  }
}

const fmtS = (ms) => `${(ms / 1000).toFixed(1)} s`;

/** What the call tells this page: into the store's views while it is the talk on screen. */
function handlersOf(t) {
  const current = () => talk === t;
  return {
    onReady() {
      if (!current()) return;
      showTalk();
      store.agentState('listening');
      setStatus(`Voice session ${t.sessionId}: talk now`);
    },
    onResuming() {
      if (current()) setStatus(`Voice session ${t.sessionId}: the connection dropped, reconnecting…`);
    },
    // a resume opens the socket again, with a new ticket when tokens are on (the first one is used up)
    async resumeUrl(url) {
      const ticket = await ticketFor(url.pathname);
      if (ticket) url.searchParams.set('ticket', ticket);
      return url;
    },
    onEvent(ev) {
      if (current()) store.event(ev);
    },
    onInterrupted(playedMs) {
      if (current())
        store.note('interrupt', 'Interrupted', `the agent stopped after ${fmtS(playedMs)} of its reply`);
    },
    onFigures(figures) {
      $('talk').dataset.heardSamples = String(figures.heardSamples);
    },
    onClose(code, reason) {
      if (!current()) return;
      if (code !== 1000)
        store.note('bad', `Voice socket closed (${code})`, reason || 'the connection was lost');
      store.ended();
      store.agentState(null);
      setStatus(`Voice session ${t.sessionId} ended`);
      store.emit('sessions');
    },
    onDone() {
      if (!current()) return;
      talk = null;
      showTalk();
      if (!store.session?.ended) store.agentState(null);
    },
  };
}

/** Stop: the session ends (DELETE, idempotent), then the socket closes and the audio is let go. */
async function stopTalk() {
  const t = talk;
  if (!t || t.stopping) return;
  t.stopping = true;
  showTalk();
  if (!t.sessionId) return t.call.close();
  t.call.end();
  await endRemote(t);
}

async function endRemote(t) {
  try {
    await json('DELETE', `${agentPath(t.agentId)}/voice-sessions/${enc(t.sessionId)}`);
  } catch (err) {
    showError(err, 'Ending the voice session');
  }
}

/** The page moves to another view while talking: the session ends, and its audio goes at once. */
function leaveTalk(t) {
  if (talk !== t) return;
  if (t.sessionId) {
    t.call.end();
    void endRemote(t);
  }
  t.call.close();
}

definePanel({
  name: 'talk',
  mount() {
    store.on('agent', showTalk);
    $('talk').addEventListener('click', () => void toggleTalk());
  },
});
