// @ts-check
// Talk: a voice session with the agent from this page (docs/api.md, "Voice sessions over a WebSocket"). The
// microphone goes through an AudioWorklet (mic-worklet.js) to the session's socket as 16-bit PCM frames; the
// agent's audio comes back and plays through another (player-worklet.js), which answers the server's
// playback messages with what was really rendered. The session's events come on the same socket.

import { agentPath, enc, json, ticketFor } from '../lib/api.js';
import { readyToRun } from '../store/run-check.js';
import { store } from '../store/store.js';
import { $, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';
import { runBody } from '../ui/run-form.js';

/** What the page asks the session for: 16 kHz is what speech-to-text models take; 20 ms frames. */
const TALK_AUDIO = { sampleRate: 16000, frameMs: 20 };
/** After the socket closes, the agent's last words still play out; then the audio is let go. */
const DRAIN_LIMIT_MS = 15_000;

/**
 * What the page played and sent, for whoever watches it (a test, a curious builder in the devtools):
 * `heardSamples` counts non-silent samples rendered to the audio output (at `outputRate`).
 */
const talkFigures = {
  heardSamples: 0,
  renderedSamples: 0,
  outputRate: 0,
  sentFrames: 0,
  playing: false,
};
Object.assign(window, { vabTalk: talkFigures });

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
    ctx: /** @type {AudioContext | null} */ (null),
    mic: /** @type {MediaStream | null} */ (null),
    socket: /** @type {WebSocket | null} */ (null),
    player: /** @type {AudioWorkletNode | null} */ (null),
    ready: false,
  };
  talk = t;
  // another view ends the talk: the session ends, and its audio goes at once
  signal.addEventListener('abort', () => leaveTalk(t), { once: true });
  showTalk();
  try {
    const { body, version } = runBody(store.agent);
    body.audio = TALK_AUDIO;
    setStatus('Starting a voice session…');
    const flow = await store.flowOf(agentId, body.version, signal);
    if (!(await readyToRun(flow, body.apiKeys, 'voice', signal))) return void teardown(t);
    store.setFlow(flow);
    // the audio first (a microphone refused must not leave a session waiting for a socket)
    await openAudio(t);
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
    await openSocket(t, started);
    store.emit('sessions');
  } catch (err) {
    showError(err, 'Talking');
    if (talk === t && !signal.aborted) {
      if (t.sessionId) void endRemote(t);
      teardown(t);
    }
  }
}

/** The audio graph: the microphone into the capture worklet, the player worklet to the speakers. */
async function openAudio(t) {
  t.ctx = new AudioContext({ latencyHint: 'interactive' });
  t.mic = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
  });
  await t.ctx.audioWorklet.addModule('/console/mic-worklet.js');
  await t.ctx.audioWorklet.addModule('/console/player-worklet.js');
  await t.ctx.resume();
  talkFigures.outputRate = t.ctx.sampleRate;
  talkFigures.heardSamples = 0;
  talkFigures.renderedSamples = 0;
  talkFigures.sentFrames = 0;
}

function connectAudio(t, format) {
  const ctx = t.ctx;
  const player = new AudioWorkletNode(ctx, 'pcm-player', {
    numberOfInputs: 0,
    numberOfOutputs: 1,
    outputChannelCount: [1],
    processorOptions: { inputRate: format.sampleRate },
  });
  player.connect(ctx.destination);
  player.port.onmessage = (e) => {
    const m = e.data;
    if (m.type === 'stats') {
      talkFigures.heardSamples = m.heardSamples;
      talkFigures.renderedSamples = m.renderedSamples;
      talkFigures.playing = m.playing;
      $('talk').dataset.heardSamples = String(m.heardSamples);
      if (t.socket === null && m.queuedMs === 0) teardown(t);
      return;
    }
    // what was really rendered of the segment: the agent keeps (and the model remembers) only that
    send(t, { type: 'playback_finished', playedMs: m.playedMs, interrupted: m.interrupted });
    if (m.interrupted)
      store.note('interrupt', 'Interrupted', `the agent stopped after ${fmtS(m.playedMs)} of its reply`);
  };
  t.player = player;
  const frameSamples = format.frameBytes / 2;
  const capture = new AudioWorkletNode(ctx, 'mic-capture', {
    numberOfInputs: 1,
    numberOfOutputs: 0,
    channelCount: 1,
    channelCountMode: 'explicit',
    processorOptions: { targetRate: format.sampleRate, frameSamples },
  });
  capture.port.onmessage = (e) => {
    const s = t.socket;
    if (!t.ready || !s || s.readyState !== WebSocket.OPEN) return;
    s.send(e.data);
    talkFigures.sentFrames++;
  };
  ctx.createMediaStreamSource(t.mic).connect(capture);
}

const fmtS = (ms) => `${(ms / 1000).toFixed(1)} s`;

function send(t, message) {
  if (t.socket?.readyState === WebSocket.OPEN) t.socket.send(JSON.stringify(message));
}

/** The socket: a ticket when tokens are on (a browser cannot put a header on a WebSocket). */
async function openSocket(t, started) {
  const ticket = await ticketFor(started.audioPath);
  if (talk !== t) return;
  const url = new URL(started.audioPath, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  if (ticket) url.searchParams.set('ticket', ticket);
  const socket = new WebSocket(url);
  socket.binaryType = 'arraybuffer';
  t.socket = socket;
  connectAudio(t, started.audio);
  socket.onmessage = (e) => {
    if (talk !== t) return;
    if (typeof e.data !== 'string') {
      t.player.port.postMessage({ type: 'audio', pcm: e.data }, [e.data]);
      return;
    }
    onControl(t, JSON.parse(e.data));
  };
  socket.onclose = (e) => {
    if (talk !== t) return;
    t.socket = null;
    t.ready = false;
    // the microphone stops now; the agent's last words play out (the player reports an empty queue)
    for (const track of t.mic?.getTracks() ?? []) track.stop();
    if (e.code !== 1000)
      store.note('bad', `Voice socket closed (${e.code})`, e.reason || 'the connection was lost');
    store.ended();
    store.agentState(null);
    setStatus(`Voice session ${t.sessionId} ended`);
    setTimeout(() => teardown(t), DRAIN_LIMIT_MS);
    store.emit('sessions');
  };
}

const PLAYBACK = {
  playback_flush: 'flush',
  playback_clear: 'clear',
  playback_pause: 'pause',
  playback_resume: 'resume',
};

function onControl(t, m) {
  if (m.type === 'ready') {
    t.ready = true;
    showTalk();
    store.agentState('listening');
    setStatus(`Voice session ${t.sessionId}: talk now`);
    return;
  }
  if (m.type === 'event') {
    store.event(m.event);
    return;
  }
  const command = PLAYBACK[m.type];
  // in order with the audio before it: the player takes both from one queue of messages
  if (command) t.player.port.postMessage({ type: command });
}

/** Stop: the session ends (DELETE, idempotent), then the socket closes and the audio is let go. */
async function stopTalk() {
  const t = talk;
  if (!t || t.stopping) return;
  t.stopping = true;
  showTalk();
  if (!t.sessionId) return teardown(t);
  send(t, { type: 'end' });
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
    send(t, { type: 'end' });
    void endRemote(t);
  }
  teardown(t);
}

/** Lets go of the microphone, the socket and the audio context. */
function teardown(t) {
  for (const track of t.mic?.getTracks() ?? []) track.stop();
  if (t.socket && t.socket.readyState <= WebSocket.OPEN) t.socket.close(1000, 'stopped');
  t.socket = null;
  void t.ctx?.close().catch(() => {});
  t.ctx = null;
  if (talk === t) {
    talk = null;
    showTalk();
    if (!store.session?.ended) store.agentState(null);
  }
}

definePanel({
  name: 'talk',
  mount() {
    store.on('agent', showTalk);
    $('talk').addEventListener('click', () => void toggleTalk());
  },
});
