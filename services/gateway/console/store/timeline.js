// @ts-check
// When each message of a voice session began, from its events, and a recording played against them: a
// message clicked seeks the recording to it, and the message being heard is highlighted while it plays.

import { enc, json, recordPath, ticketFor } from '../lib/api.js';
import { $, setStatus, showError } from '../ui/dom.js';
import { store } from './store.js';

/**
 * Speech at most people's pace (~200 words a minute). Measured against a recording (talk.test.ts, espeak-ng at
 * 170 wpm): 8 words spoken in 2.15 s, their final transcript 0.45 s after; these put the start ~0.4 s early,
 * the side to err on (the message is heard from its first word), and a slower STT only moves it earlier.
 */
const MS_PER_WORD = 300;
/** From the end of speech to its final transcript without interim ones: the VAD's silence and the STT. */
const FINAL_AFTER_MS = 600;
/** An interim transcript comes a word or so into the speech. */
const INTERIM_AFTER_MS = 500;

/** When each message began, from the events: what a recording is played against. */
let timeline = { speakingAt: null, unstamped: null, userFirst: null };
/**
 * The past session's recording shown: its t=0 (epoch ms), its path, and its reads retried.
 * @type {{ startedAt: number, path: string, retries: number } | null}
 */
let recording = null;

function resetTimeline() {
  timeline = { speakingAt: null, unstamped: null, userFirst: null };
}

/**
 * An agent message began when the agent started speaking it (`agent_state: speaking`), which may come before
 * its bubble (a literal greeting's reply event comes once it was said) or after (an LLM reply streams first).
 * `data-first-at` (the bubble's first event) stands in when no state came (a text session).
 */
export function stampReply(li, ev) {
  if (!li.dataset.firstAt) li.dataset.firstAt = String(ev.at);
  if (li.dataset.at) return;
  const tl = timeline;
  if (tl.speakingAt !== null) {
    li.dataset.at = String(tl.speakingAt);
    tl.speakingAt = null;
  } else tl.unstamped = li;
}

export function onAgentState(ev) {
  if (ev.state !== 'speaking') return;
  const tl = timeline;
  if (tl.unstamped && !tl.unstamped.dataset.at) {
    tl.unstamped.dataset.at = String(ev.at);
    tl.unstamped = null;
  } else tl.speakingAt = ev.at;
}

/** The first transcript of an utterance (interim or final): when it began is reckoned from it. */
export function noteTranscript(ev) {
  timeline.userFirst ??= { at: ev.at, interim: !ev.final };
}

/**
 * A user message: no event marks the start of the user's speech, so it is reckoned back from its first
 * transcript — a word into it for an interim one, or the words' length and the end-of-turn wait for a final.
 */
export function stampUser(li, ev) {
  const first = timeline.userFirst ?? { at: ev.at, interim: false };
  timeline.userFirst = null;
  const words = ev.text.trim().split(/\s+/).length;
  const at = first.interim ? first.at - INTERIM_AFTER_MS : first.at - FINAL_AFTER_MS - words * MS_PER_WORD;
  li.dataset.firstAt = String(ev.at);
  li.dataset.at = String(Math.round(at));
}

/** The messages with their start (epoch ms), in order: never before the one above them. */
function timedMessages() {
  const out = [];
  let last = -Infinity;
  for (const li of $('log').querySelectorAll('li.user, li.agent')) {
    const raw = Number(li.dataset.at ?? li.dataset.firstAt);
    if (!Number.isFinite(raw)) continue;
    last = Math.max(last, raw);
    out.push({ li, at: last });
  }
  return out;
}

// ---- a recording ---------------------------------------------------------------------------------

function clearRecording() {
  const audio = $('recording');
  audio.pause();
  audio.removeAttribute('src');
  audio.load();
  recording = null;
  $('player').hidden = true;
  $('recording-info').textContent = '';
  $('log').classList.remove('timed');
  for (const li of $('log').querySelectorAll('li.heard')) unmark(li);
}

/** The recording's URL for the <audio> element: with a ticket when tokens are on (it cannot send a header). */
async function recordingSrc(path, signal) {
  const ticket = await ticketFor(path, signal);
  return ticket ? `${path}?ticket=${enc(ticket)}` : path;
}

/**
 * A past session's recording, when it has one: streamed by the <audio> element (a Range request per seek).
 * A recording's ticket opens its path as often as the element asks until it expires (TICKET_TTL_MS); a
 * request after that fails, and the element is given a new ticket where it was (`recover`).
 */
async function showRecording(s, signal) {
  const path = `${recordPath(s)}/recording`;
  const record = await json('GET', recordPath(s), undefined, { signal });
  const rec = record.recording;
  if (!rec) {
    // a voice session's or a call's (which has a channel): there could have been one
    if (record.sessionType === 'voice' || record.channel !== undefined) {
      $('recording-info').textContent = `No recording of this ${record.channel ? 'call' : 'session'}.`;
      $('player').hidden = false;
      $('recording').hidden = true;
    }
    return;
  }
  const src = await recordingSrc(path, signal);
  recording = { startedAt: rec.startedAt, path, retries: 0 };
  const audio = $('recording');
  audio.hidden = false;
  audio.src = src;
  $('recording-info').textContent =
    `Recording, ${(rec.durationMs / 1000).toFixed(1)} s · click a message to hear it`;
  $('player').hidden = false;
  $('log').classList.add('timed');
  // the messages replayed so far become places to play from (and the ones still coming, as they play)
  highlight();
}

/** The element could not read the file (its ticket expired, the network dropped): once more, from there. */
async function recover() {
  const rec = recording;
  const audio = $('recording');
  if (!rec || !audio.getAttribute('src')) return;
  if (rec.retries >= 2) {
    setStatus('The recording could not be played', true);
    return;
  }
  rec.retries++;
  const at = audio.currentTime;
  const playing = !audio.paused;
  try {
    const src = await recordingSrc(rec.path, store.signal);
    if (recording !== rec) return;
    audio.src = src;
    audio.currentTime = at;
    if (playing) await audio.play();
  } catch {
    // the next error tries again, up to the bound above
  }
}

function unmark(li) {
  li.classList.remove('heard');
  li.removeAttribute('aria-current');
}

/** The message whose time the recording is at, while it plays (or was moved to). */
function highlight() {
  const rec = recording;
  const audio = $('recording');
  if (!rec) return;
  const now = rec.startedAt + audio.currentTime * 1000;
  const messages = timedMessages();
  let current = null;
  for (const m of messages) if (m.at <= now) current = m.li;
  const started = !audio.paused || audio.currentTime > 0;
  for (const { li } of messages) {
    // a message is a place in the recording: reachable by the keyboard too
    if (!li.hasAttribute('tabindex')) li.tabIndex = 0;
    if (started && li === current) {
      li.classList.add('heard');
      li.setAttribute('aria-current', 'true');
    } else unmark(li);
  }
}

/** A click on a message: the recording from where it began. */
function seekTo(li) {
  const rec = recording;
  if (!rec) return false;
  const m = timedMessages().find((x) => x.li === li);
  if (!m) return false;
  const audio = $('recording');
  audio.currentTime = Math.max(0, (m.at - rec.startedAt) / 1000);
  void audio.play().catch(() => {});
  highlight();
  return true;
}

export function mount() {
  store.on('reset', () => {
    resetTimeline();
    clearRecording();
  });
  // a past voice session's recording, or a call's, beside its transcript
  store.on('session', (s) => {
    if (s.live || (s.kind !== 'voice' && s.kind !== 'call')) return;
    const signal = store.signal;
    showRecording(s, signal).catch((err) => showError(err, 'Loading the recording'));
  });
  const audio = $('recording');
  for (const type of ['timeupdate', 'seeked', 'play', 'pause', 'ended'])
    audio.addEventListener(type, highlight);
  audio.addEventListener('error', () => void recover());
  audio.addEventListener('loadeddata', () => {
    if (recording) recording.retries = 0;
  });
  const messageOf = (e) => (e.target instanceof Element ? e.target.closest('li.user, li.agent') : null);
  $('log').addEventListener('click', (e) => {
    const li = messageOf(e);
    if (li) seekTo(li);
  });
  $('log').addEventListener('keydown', (e) => {
    const li = messageOf(e);
    if (li && (e.key === 'Enter' || e.key === ' ') && seekTo(li)) e.preventDefault();
  });
}
