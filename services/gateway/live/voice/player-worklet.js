// @ts-check
// The agent's voice, played as the voice socket asks (docs/api.md, "Voice sessions over a WebSocket"): its
// 16-bit PCM resampled to the context's rate on arrival and queued; `flush` is answered once everything
// before it has been rendered, `clear` at once with how much of the segment was rendered; `pause`/`resume`
// hold the queue. What it reports is what went to the audio output, counted here where it is rendered.

/** A sample this loud (as 16-bit PCM: 330) is sound, not silence or dither. */
const AUDIBLE = 330 / 32768;
/** How often (render quanta) the page hears the figures: ~50 ms at 48 kHz. */
const REPORT_EVERY = 20;

class PcmPlayer extends AudioWorkletProcessor {
  /** @param {AudioWorkletNodeOptions} options */
  constructor(options) {
    super(options);
    /** Input samples per output sample. */
    this.step = options.processorOptions.inputRate / sampleRate;
    /** @type {Float32Array[]} */
    this.queue = [];
    this.head = 0;
    this.queued = 0;
    this.paused = false;
    /** The segment being played: output samples rendered of it; null between segments. */
    this.segment = null;
    this.flushPending = false;
    this.heard = 0;
    this.rendered = 0;
    this.quanta = 0;
    this.resetResampler();
    this.port.onmessage = (e) => this.message(e.data);
  }

  resetResampler() {
    this.prev = 0;
    this.t = 0;
  }

  /** @param {{ type: string, pcm?: ArrayBuffer }} m */
  message(m) {
    if (m.type === 'audio') this.enqueue(new Int16Array(m.pcm));
    else if (m.type === 'flush') {
      // a flush with nothing played since the last report has no segment to report (as the protocol's own
      // reference client does)
      if (this.segment) this.flushPending = true;
    } else if (m.type === 'clear') {
      this.queue = [];
      this.head = 0;
      this.queued = 0;
      this.resetResampler();
      this.finish(true);
    } else if (m.type === 'pause') this.paused = true;
    else if (m.type === 'resume') this.paused = false;
  }

  /** Linear interpolation to the context's rate, continuous across the chunks of a segment. */
  /** @param {Int16Array} pcm */
  enqueue(pcm) {
    this.segment ??= { rendered: 0 };
    const out = new Float32Array(Math.ceil(pcm.length / this.step) + 2);
    let n = 0;
    for (let i = 0; i < pcm.length; i++) {
      const x = pcm[i] / 32768;
      while (this.t < 1) {
        out[n++] = this.prev + (x - this.prev) * this.t;
        this.t += this.step;
      }
      this.t -= 1;
      this.prev = x;
    }
    if (n === 0) return;
    this.queue.push(out.subarray(0, n));
    this.queued += n;
  }

  /** @param {boolean} interrupted */
  finish(interrupted) {
    const seg = this.segment;
    this.flushPending = false;
    this.segment = null;
    if (!seg) return;
    const playedMs = Math.round((seg.rendered / sampleRate) * 1000);
    this.port.postMessage({ type: 'finished', playedMs, interrupted });
  }

  /** @param {Float32Array[][]} _inputs @param {Float32Array[][]} outputs */
  process(_inputs, outputs) {
    const out = outputs[0][0];
    let i = 0;
    if (!this.paused) {
      while (i < out.length && this.queue.length > 0) {
        const chunk = this.queue[0];
        const take = Math.min(out.length - i, chunk.length - this.head);
        for (let k = 0; k < take; k++) {
          const v = chunk[this.head + k];
          out[i + k] = v;
          if (v >= AUDIBLE || v <= -AUDIBLE) this.heard++;
        }
        i += take;
        this.head += take;
        this.queued -= take;
        if (this.head === chunk.length) {
          this.queue.shift();
          this.head = 0;
        }
      }
      if (this.segment) this.segment.rendered += i;
      this.rendered += i;
    }
    out.fill(0, i);
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    if (this.queued === 0 && this.flushPending) this.finish(false);
    if (++this.quanta % REPORT_EVERY === 0) {
      this.port.postMessage({
        type: 'stats',
        heardSamples: this.heard,
        renderedSamples: this.rendered,
        queuedMs: Math.round((this.queued / sampleRate) * 1000),
        playing: this.queued > 0 && !this.paused,
      });
    }
    return true;
  }
}

registerProcessor('pcm-player', PcmPlayer);
