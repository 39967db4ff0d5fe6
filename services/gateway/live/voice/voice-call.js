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
 * @property {() => void} [onReady] the server's `ready`: the agent listens
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
    const socket = new WebSocket(wsUrl);
    socket.binaryType = 'arraybuffer';
    this.socket = socket;
    this.connectAudio(format);
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
      this.ready = false;
      // the microphone stops now; the agent's last words play out (the player reports an empty queue)
      this.stopMic();
      this.handlers.onClose?.(e.code, e.reason);
      setTimeout(() => this.close(), DRAIN_LIMIT_MS);
    };
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
