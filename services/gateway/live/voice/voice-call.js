// @ts-check
// One voice call from a browser over the voice socket (docs/api.md, "Voice sessions over a WebSocket"): the
// microphone goes through an AudioWorklet (mic-worklet.js) to the socket as 16-bit PCM frames at the
// microphone's own pace; the agent's audio comes back and plays through another (player-worklet.js), which
// answers the server's playback messages with what was really rendered; the call's events come on the same
// socket. Shared by the console's Talk, the public talk page and the widget (on another site's page: its
// worklets are found next to this module, wherever it was loaded from). No DOM: whoever shows the call hears
// of it through the handlers.

/** The worklets, next to this module (the widget loads it from our origin into another site's page). */
const MIC_WORKLET = new URL('./mic-worklet.js', import.meta.url).href;
const PLAYER_WORKLET = new URL('./player-worklet.js', import.meta.url).href;

/** What a page asks a call for: 16 kHz is what speech-to-text models take; 20 ms frames. */
export const CALL_AUDIO = { sampleRate: 16000, frameMs: 20 };
/** After the socket closes, the agent's last words still play out; then the audio is let go. */
const DRAIN_LIMIT_MS = 15_000;
/** Between tries to resume a dropped socket: doubled each time up to the last (within the server's window). */
const RESUME_DELAYS_MS = [0, 250, 500, 1000, 2000];
/** A socket dropped with no close frame: its gateway died (or the network went), and the session waits. */
const DROPPED = 1006;

/** The protocol's playback messages, as the player worklet takes them. */
const PLAYBACK = {
  playback_flush: 'flush',
  playback_clear: 'clear',
  playback_pause: 'pause',
  playback_resume: 'resume',
};

/**
 * @typedef {{ sampleRate: number, frameBytes: number }} AudioFormat
 * @typedef {object} CallHandlers
 * @property {() => void} [onReady] the server's `ready`: the agent listens (again, after a resume)
 * @property {() => void} [onResuming] the socket dropped (its gateway died): the call reconnects by itself
 * @property {(url: URL) => Promise<URL | string> | URL | string} [resumeUrl] the URL a resume opens (the
 *   same path with `?resume=`), with what the page adds to it (the console: a new ticket)
 * @property {(event: any) => void} [onEvent] one of the call's events (`agent_state`, `user_turn`, …)
 * @property {(playedMs: number) => void} [onInterrupted] the caller cut a reply: this much of it was heard
 * @property {(code: number, reason: string) => void} [onClose] the socket closed: the call is over (its last
 *   audio may still play)
 * @property {() => void} [onDone] the audio let go: played out, or the call was closed
 * @property {(figures: CallFigures) => void} [onFigures] the player's figures changed (~20 times a second)
 *
 * @typedef {object} CallFigures what the page played and sent, for whoever watches it (a test, the devtools)
 * @property {number} heardSamples non-silent samples rendered to the audio output (at `outputRate`)
 * @property {number} renderedSamples
 * @property {number} outputRate
 * @property {number} sentFrames
 * @property {boolean} playing
 */

export class VoiceCall {
  /** @param {CallHandlers} handlers */
  constructor(handlers = {}) {
    this.handlers = handlers;
    /** @type {AudioContext | null} */
    this.ctx = null;
    /** @type {MediaStream | null} */
    this.mic = null;
    /** @type {WebSocket | null} */
    this.socket = null;
    /** @type {AudioWorkletNode | null} */
    this.player = null;
    this.ready = false;
    this.closed = false;
    /** The hang-up was asked for: a drop after it is not resumed. */
    this.ending = false;
    /** @type {URL | null} the socket's URL without its ticket (a resume adds its token) */
    this.baseUrl = null;
    /** @type {{ token: string, withinMs: number } | null} the last `ready`'s resume token */
    this.resumable = null;
    /** @type {{ deadline: number, tries: number } | null} while reconnecting after a drop */
    this.resuming = null;
    /** @type {CallFigures} */
    this.figures = { heardSamples: 0, renderedSamples: 0, outputRate: 0, sentFrames: 0, playing: false };
  }

  /**
   * The microphone and the audio graph's modules: first, so that a microphone refused starts no call that
   * would wait for a socket.
   */
  async openAudio() {
    this.ctx = new AudioContext({ latencyHint: 'interactive' });
    this.mic = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    await this.ctx.audioWorklet.addModule(MIC_WORKLET);
    await this.ctx.audioWorklet.addModule(PLAYER_WORKLET);
    await this.ctx.resume();
    this.figures.outputRate = this.ctx.sampleRate;
  }

  /**
   * Opens the call's socket (an http(s) URL becomes ws(s)) and joins the microphone and the player to it.
   * @param {string | URL} url
   * @param {AudioFormat} format the start's `audio`
   */
  connect(url, format) {
    const wsUrl = new URL(url);
    if (wsUrl.protocol === 'https:') wsUrl.protocol = 'wss:';
    else if (wsUrl.protocol === 'http:') wsUrl.protocol = 'ws:';
    this.baseUrl = new URL(wsUrl);
    this.baseUrl.search = '';
    this.openSocket(wsUrl);
    this.connectAudio(format);
  }

  /** @param {URL} wsUrl */
  openSocket(wsUrl) {
    const socket = new WebSocket(wsUrl);
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    socket.onmessage = (e) => {
      if (this.socket !== socket) return;
      if (typeof e.data !== 'string') {
        this.player?.port.postMessage({ type: 'audio', pcm: e.data }, [e.data]);
        return;
      }
      this.onControl(JSON.parse(e.data));
    };
    socket.onclose = (e) => {
      if (this.socket !== socket) return;
      this.socket = null;
      const wasReady = this.ready;
      this.ready = false;
      // its gateway died: the session waits for this call on any gateway (docs/api.md › Resuming)
      if (!this.closed && !this.ending && this.resumable && this.resumeMayGoOn(e.code, wasReady)) {
        if (!this.resuming) {
          this.resuming = { deadline: Date.now() + this.resumable.withinMs, tries: 0 };
          this.handlers.onResuming?.();
        }
        this.tryResume();
        return;
      }
      this.over(e.code, e.reason);
    };
  }

  /**
   * The call is over (its socket closed for good): the microphone stops now; the agent's last words play out
   * (the player reports an empty queue).
   * @param {number} code
   * @param {string} reason
   */
  over(code, reason) {
    this.resuming = null;
    this.stopMic();
    this.handlers.onClose?.(code, reason);
    setTimeout(() => this.close(), DRAIN_LIMIT_MS);
  }

  /**
   * Whether a close is one to resume after: a drop of a socket that was ready, or, while resuming, a try that
   * failed to connect (no gateway answered yet) within the window. A try refused by the session (4401: not
   * its token, 4404: it ended) ends the call with that close.
   * @param {number} code
   * @param {boolean} wasReady
   */
  resumeMayGoOn(code, wasReady) {
    if (wasReady) return code === DROPPED;
    return this.resuming !== null && code === DROPPED && Date.now() < this.resuming.deadline;
  }

  /** One try to reopen the socket with the last token, after a delay that grows with the tries. */
  tryResume() {
    const r = this.resuming;
    const token = this.resumable?.token;
    if (!r || !token || !this.baseUrl) return;
    const delay = RESUME_DELAYS_MS[Math.min(r.tries, RESUME_DELAYS_MS.length - 1)] ?? 0;
    r.tries++;
    const base = this.baseUrl;
    setTimeout(() => {
      if (this.closed || this.resuming !== r) return;
      const url = new URL(base);
      url.searchParams.set('resume', token);
      Promise.resolve(this.handlers.resumeUrl ? this.handlers.resumeUrl(url) : url)
        .then((u) => {
          if (!this.closed && this.resuming === r) this.openSocket(new URL(u));
        })
        .catch(() => {
          // the page could not add its part (a ticket): a later try may
          if (Date.now() < r.deadline) this.tryResume();
          else this.over(DROPPED, 'the call could not be resumed');
        });
    }, delay);
  }

  /** @param {AudioFormat} format */
  connectAudio(format) {
    const ctx = this.ctx;
    if (!ctx || !this.mic) throw new Error('openAudio() first');
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
        this.figures.heardSamples = m.heardSamples;
        this.figures.renderedSamples = m.renderedSamples;
        this.figures.playing = m.playing;
        this.handlers.onFigures?.(this.figures);
        if (this.socket === null && m.queuedMs === 0) this.close();
        return;
      }
      // what was really rendered of the segment: the agent keeps (and the model remembers) only that
      this.send({ type: 'playback_finished', playedMs: m.playedMs, interrupted: m.interrupted });
      if (m.interrupted) this.handlers.onInterrupted?.(m.playedMs);
    };
    this.player = player;
    const capture = new AudioWorkletNode(ctx, 'mic-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: 'explicit',
      processorOptions: { targetRate: format.sampleRate, frameSamples: format.frameBytes / 2 },
    });
    capture.port.onmessage = (e) => {
      const s = this.socket;
      if (!this.ready || !s || s.readyState !== WebSocket.OPEN) return;
      s.send(e.data);
      this.figures.sentFrames++;
    };
    ctx.createMediaStreamSource(this.mic).connect(capture);
  }

  /** @param {any} m */
  onControl(m) {
    if (m.type === 'ready') {
      this.ready = true;
      this.resuming = null;
      this.resumable = m.resumeToken ? { token: m.resumeToken, withinMs: m.resumeWithinMs ?? 0 } : null;
      this.handlers.onReady?.();
      return;
    }
    if (m.type === 'event') {
      this.handlers.onEvent?.(m.event);
      return;
    }
    const command = PLAYBACK[m.type];
    // in order with the audio before it: the player takes both from one queue of messages
    if (command) this.player?.port.postMessage({ type: command });
  }

  /** @param {unknown} message */
  send(message) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  /** Hang up: the call ends (the server closes the socket once it has; its last audio still plays). */
  end() {
    this.ending = true;
    this.send({ type: 'end' });
  }

  stopMic() {
    for (const track of this.mic?.getTracks() ?? []) track.stop();
  }

  /** Lets go of the microphone, the socket and the audio context at once (idempotent). */
  close() {
    if (this.closed) return;
    this.closed = true;
    this.stopMic();
    const socket = this.socket;
    this.socket = null;
    if (socket && socket.readyState <= WebSocket.OPEN) socket.close(1000, 'stopped');
    void this.ctx?.close().catch(() => {});
    this.ctx = null;
    this.handlers.onDone?.();
  }
}
