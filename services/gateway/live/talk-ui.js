// @ts-check
// Talking to a live agent, as the public sees it (docs/api.md, "The talk page and the widget"): a call button
// (hang up while talking), the agent's state, the transcript as it happens and a status line that says what
// went wrong in words (the microphone refused, the agent busy: try again, a key refused). Built into any
// root: the talk page's body, or the widget's shadow root on another site's page. No builder tools, no token:
// the call starts with `POST <origin>/live/<subdomain>/calls` (a publishable key when the page is not ours)
// and runs over the voice socket (voice/voice-call.js, the console's Talk's own client).

import { CALL_AUDIO, VoiceCall } from './voice/voice-call.js';

/**
 * @typedef {object} TalkOptions
 * @property {string} subdomain the live deploy's subdomain
 * @property {string} origin where the /live routes are (the gateway's origin, the widget's script's)
 * @property {string} [key] a publishable key (the widget on another site)
 * @property {string} [title] the heading
 */

/** How long a hang-up waits for the server to close the call before it lets go itself. */
const HANG_UP_LIMIT_MS = 5000;

const STATE_TEXT = {
  idle: 'Ready',
  connecting: 'Connecting…',
  listening: 'Listening',
  thinking: 'Thinking…',
  speaking: 'Speaking',
  ended: 'Call ended',
  busy: 'Busy',
  error: 'Not connected',
};

/**
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {(string | Node)[]} children
 */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

/** An answer's error in words: its `message` (our errors are `{ code, message }`), else its status. */
async function errorText(res) {
  try {
    const body = await res.json();
    if (typeof body?.message === 'string') return body.message;
  } catch {
    // not JSON: the status says it
  }
  return `HTTP ${res.status}`;
}

/** Seconds to wait from a Retry-After header (seconds or an HTTP date); 5 when it says nothing usable. */
function retryAfterSeconds(res) {
  const value = res.headers.get('retry-after') ?? '';
  const seconds = Number(value);
  if (value !== '' && Number.isFinite(seconds)) return Math.max(1, Math.ceil(seconds));
  const at = Date.parse(value);
  return Number.isNaN(at) ? 5 : Math.max(1, Math.ceil((at - Date.now()) / 1000));
}

/**
 * The talk UI in `root`. Its element carries `data-state` (idle, connecting, listening, thinking, speaking,
 * ended, busy, error) and, for tests and the curious, `data-heard-samples` (non-silent samples of the agent's
 * audio rendered here) and `data-call-id`.
 * @param {Element | ShadowRoot} root
 * @param {TalkOptions} opts
 */
export function mountTalk(root, opts) {
  const heading = el('h1', { class: 'title' }, opts.title ?? 'Talk to the agent');
  const badge = el('span', { class: 'state', role: 'status', 'aria-live': 'polite' });
  const button = /** @type {HTMLButtonElement} */ (
    el('button', { type: 'button', class: 'call' }, 'Start call')
  );
  const status = el('p', { class: 'status', 'aria-live': 'polite' });
  const log = el('ol', { class: 'transcript', 'aria-live': 'polite', 'aria-label': 'Transcript' });
  const box = el(
    'section',
    { class: 'vab-talk', 'aria-label': opts.title ?? 'Talk to the agent' },
    el('div', { class: 'bar' }, heading, badge),
    log,
    el('div', { class: 'bar' }, button, status),
  );
  root.append(box);

  /** @type {VoiceCall | null} */
  let call = null;
  /** Reply bubbles by reply id, and the interim transcript shown. */
  let replies = new Map();
  /** @type {HTMLElement | null} */
  let interim = null;
  let retryTimer = 0;

  const setState = (state) => {
    box.dataset.state = state;
    badge.textContent = STATE_TEXT[state] ?? state;
  };
  const say = (text, error = false) => {
    status.textContent = text;
    status.classList.toggle('error', error);
    status.setAttribute('role', error ? 'alert' : 'status');
  };
  const showButton = () => {
    const live = call !== null;
    button.textContent = live ? 'Hang up' : box.dataset.state === 'idle' ? 'Start call' : 'Call again';
    button.classList.toggle('hang-up', live);
  };
  const append = (node) => {
    log.append(node);
    log.scrollTop = log.scrollHeight;
    return node;
  };
  const bubble = (role, text = '') => append(el('li', { class: role }, text));

  const onEvent = (ev) => {
    if (ev.type === 'agent_state') setState(ev.state);
    else if (ev.type === 'user_turn') {
      if (!ev.final) {
        interim ??= bubble('user interim');
        interim.textContent = ev.text;
        return;
      }
      if (interim) interim.remove();
      interim = null;
      if (ev.text) bubble('user', ev.text);
    } else if (ev.type === 'agent_reply_delta') {
      let li = replies.get(ev.replyId);
      if (!li) replies.set(ev.replyId, (li = bubble('agent streaming')));
      li.textContent += ev.delta;
    } else if (ev.type === 'agent_reply') {
      // an interrupted reply is kept as far as it was heard, possibly under an id of its own: it ends the
      // streamed bubble it cuts short rather than showing twice
      const li =
        replies.get(ev.replyId) ??
        [...log.querySelectorAll('li.agent.streaming')].find((b) => b.textContent?.startsWith(ev.text)) ??
        bubble('agent');
      replies.set(ev.replyId, li);
      li.classList.remove('streaming');
      li.textContent = ev.text;
    } else if (ev.type === 'error') say(`The agent had a problem: ${ev.message}`, true);
  };

  /** The call is over (the socket closed, or it never opened): the UI is ready for another. */
  const finished = (state, text, error = false) => {
    setState(state);
    say(text, error);
    button.disabled = false;
    showButton();
  };

  const start = async () => {
    window.clearTimeout(retryTimer);
    button.disabled = false;
    log.replaceChildren();
    replies = new Map();
    interim = null;
    delete box.dataset.callId;
    const c = new VoiceCall({
      onReady: () => {
        setState('listening');
        say('Connected: talk now.');
      },
      // its gateway died: the call reconnects by itself with its resume token (a moment of silence)
      onResuming: () => call === c && say('Reconnecting…'),
      onEvent: (ev) => call === c && onEvent(ev),
      onFigures: (f) => {
        box.dataset.heardSamples = String(f.heardSamples);
      },
      onClose: (code, reason) => {
        if (call !== c) return;
        call = null;
        if (code === 1000) finished('ended', 'Call ended.');
        else finished('error', `The call was cut off (${code}${reason ? `: ${reason}` : ''}).`, true);
      },
    });
    call = c;
    setState('connecting');
    showButton();
    try {
      say('Asking for your microphone…');
      try {
        await c.openAudio();
      } catch (err) {
        throw new Error(
          `The microphone is needed to talk: allow it for this page and try again (${err?.name ?? err}).`,
        );
      }
      if (call !== c) return;
      say('Calling…');
      const headers = { 'content-type': 'application/json' };
      if (opts.key) headers.authorization = `Bearer ${opts.key}`;
      const res = await fetch(`${opts.origin}/live/${encodeURIComponent(opts.subdomain)}/calls`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ audio: CALL_AUDIO }),
        // the key is the credential; no cookie of ours goes with a call
        credentials: 'omit',
      });
      if (res.status === 429 || res.status === 503) {
        const wait = retryAfterSeconds(res);
        const why = await errorText(res);
        c.close();
        call = null;
        busy(wait, why);
        return;
      }
      if (!res.ok) throw new Error(await refusal(res));
      const started = await res.json();
      if (call !== c) return;
      box.dataset.callId = started.callId;
      c.connect(new URL(started.audioPath, opts.origin), started.audio);
    } catch (err) {
      c.close();
      if (call !== c) return;
      call = null;
      const text = err instanceof TypeError ? `Could not reach the agent (${err.message}).` : err.message;
      finished('error', text, true);
    }
  };

  /** Over a cap: "busy, try again" with the server's Retry-After, the button back when it has passed. */
  const busy = (wait, why) => {
    setState('busy');
    showButton();
    button.disabled = true;
    let left = wait;
    const tick = () => {
      if (left <= 0) {
        button.disabled = false;
        say(`The agent was busy (${why}). Try again now.`);
        return;
      }
      say(`The agent is busy right now. Try again in ${left} s. (${why})`);
      left--;
      retryTimer = window.setTimeout(tick, 1000);
    };
    tick();
  };

  const hangUp = () => {
    const c = call;
    if (!c) return;
    say('Hanging up…');
    button.disabled = true;
    c.end();
    // the server closes the socket once the call has ended; if it does not, the call is let go here
    window.setTimeout(() => {
      if (call !== c) return;
      call = null;
      c.close();
      finished('ended', 'Call ended.');
    }, HANG_UP_LIMIT_MS);
  };

  button.addEventListener('click', () => {
    if (call) hangUp();
    else void start();
  });
  // leaving the page hangs up (the server would end the call when the socket drops; this says so first)
  window.addEventListener('pagehide', () => call?.end());
  setState('idle');
  showButton();
  return box;
}

/** A refusal in words: who refused and why (a key, an origin, a deploy that is not live). */
async function refusal(res) {
  const text = await errorText(res);
  if (res.status === 401 || res.status === 403) return `This site may not call this agent: ${text}`;
  if (res.status === 404) return `There is no live agent here: ${text}`;
  return `The call could not start: ${text}`;
}
