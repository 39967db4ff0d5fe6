// @ts-check
// The events stream of the session on screen, into the store: an EventSource per view, closed with it.

import { json, recordPath, ticketFor } from '../lib/api.js';
import { EVENT_TYPES } from '../lib/event-types.js';
import { setStatus, showError } from '../ui/dom.js';
import { store } from './store.js';

const STREAM_RETRIES = 5;
/** `error` is also the EventSource's own failure: it has a listener of its own. */
const NAMED_TYPES = EVENT_TYPES.filter((t) => t !== 'error');

export function mount() {
  store.on('session', (s) => {
    if (s.eventsVia !== 'socket') void follow(s, store.signal);
  });
}

/**
 * Follows a session's events with an EventSource. A ticket is single use, so the browser's own reconnect
 * (same URL) cannot work with one: on a dropped connection the page opens a new stream itself, with a new
 * ticket, from the last event it has.
 * @param {import('./store.js').Session} s
 * @param {AbortSignal} signal the view's: the stream closes with it
 */
async function follow(s, signal, attempt = 0) {
  if (signal.aborted) return;
  const path = `${recordPath(s)}/events`;
  const params = new URLSearchParams();
  try {
    const ticket = await ticketFor(path, signal);
    if (ticket) params.set('ticket', ticket);
  } catch (err) {
    // no ticket for that stream (a gateway whose calls have no events route refuses its path): a closed
    // session is still shown, from its record
    if (!signal.aborted && (await closedSession(s, signal))) return;
    showError(err, 'Opening the events stream');
    return;
  }
  if (store.lastId > 0) params.set('lastEventId', String(store.lastId));
  const query = params.toString();
  const es = new EventSource(query ? `${path}?${query}` : path);
  const stop = () => {
    es.close();
    signal.removeEventListener('abort', stop);
  };
  signal.addEventListener('abort', stop);
  let received = 0;
  for (const type of NAMED_TYPES) {
    es.addEventListener(type, (e) => {
      received++;
      store.event(JSON.parse(e.data));
      if (type === 'session_ended') stop();
    });
  }
  es.addEventListener('open', () => store.emit('stream-open'));
  es.addEventListener('error', (/** @type {MessageEvent} */ e) => {
    if (e.data) {
      const ev = JSON.parse(e.data);
      // an event of the session (an error the model saw) has an id; the stream's own error has none
      if (typeof ev.id === 'number') return store.event(ev);
      stop();
      store.note('bad', `Stream ${ev.code}`, ev.message);
      return;
    }
    stop();
    if (store.session?.ended) return;
    void (async () => {
      // a closed session's stream ends without session_ended when it has no more events to give (a stream
      // that brought some may only have dropped: it is reopened first)
      if (received === 0 && (await closedSession(s, signal))) return;
      if (signal.aborted) return;
      if (attempt + 1 >= STREAM_RETRIES || (received === 0 && attempt > 0)) {
        store.emit('stream-failed');
        setStatus('The events stream is not available', true);
        return;
      }
      setTimeout(() => void follow(s, signal, received > 0 ? 0 : attempt + 1), 500 * (attempt + 1));
    })();
  });
}

/**
 * Whether the session is closed (nothing more will come); one that has no events at all (recorded by a
 * client, or before events were kept) is shown from its transcript instead.
 * @param {import('./store.js').Session} s
 * @param {AbortSignal} signal
 */
async function closedSession(s, signal) {
  try {
    const record = await json('GET', recordPath(s), undefined, { signal });
    // a test session says `closed`, a call `ended`
    if (record.status !== 'closed' && record.status !== 'ended') return false;
    store.ended();
    if (store.seen.size > 0) return true;
    // a call carries its messages; a test session's are a route of their own
    const messages =
      record.messages ?? (await json('GET', `${recordPath(s)}/messages`, undefined, { signal }));
    store.note('info', 'Transcript', 'no events were recorded for this session');
    for (const m of messages) {
      store.message(m.role === 'user' ? 'user' : 'agent', m.content, m.timestamp);
      if (m.metrics) store.turn(m.metrics);
    }
    const last = messages.at(-1);
    if (last) store.step(last.stepId);
    return true;
  } catch {
    // a view that is gone needs nothing more; any other failure: the stream is tried again
    return signal.aborted;
  }
}
