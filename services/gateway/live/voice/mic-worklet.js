// @ts-check
// The microphone, as the voice socket takes it (docs/api.md, "Voice sessions over a WebSocket"): the
// context's audio resampled to the session's rate, as 16-bit mono PCM frames of exactly `frameSamples`, each
// posted to the page as soon as it is full (so frames leave at the microphone's own pace: real time).

class MicCapture extends AudioWorkletProcessor {
  /** @param {AudioWorkletNodeOptions} options */
  constructor(options) {
    super(options);
    const { targetRate, frameSamples } = options.processorOptions;
    /** Input samples per output sample (the context runs at 44.1 or 48 kHz, the session at 16 kHz). */
    this.ratio = sampleRate / targetRate;
    this.frameSamples = frameSamples;
    this.frame = new Int16Array(frameSamples);
    this.filled = 0;
    // the resampler: each output sample is the mean of the input over its own span (a box filter, so what
    // is above the new Nyquist frequency is damped rather than folded into speech)
    this.acc = 0;
    this.weight = 0;
    this.left = this.ratio;
  }

  /** @param {number} v */
  emit(v) {
    const s = Math.max(-1, Math.min(1, v));
    this.frame[this.filled++] = s < 0 ? Math.round(s * 0x8000) : Math.round(s * 0x7fff);
    if (this.filled < this.frameSamples) return;
    this.port.postMessage(this.frame.buffer, [this.frame.buffer]);
    this.frame = new Int16Array(this.frameSamples);
    this.filled = 0;
  }

  /** @param {Float32Array[][]} inputs */
  process(inputs) {
    const channels = inputs[0];
    // no input yet (the microphone is starting): nothing is sent, the page sends nothing either
    if (!channels || channels.length === 0) return true;
    const n = channels[0].length;
    for (let i = 0; i < n; i++) {
      let x = 0;
      for (const ch of channels) x += ch[i];
      x /= channels.length;
      let take = 1;
      while (take > 0) {
        const part = Math.min(take, this.left);
        this.acc += x * part;
        this.weight += part;
        this.left -= part;
        take -= part;
        if (this.left <= 1e-9) {
          this.emit(this.acc / this.weight);
          this.acc = 0;
          this.weight = 0;
          this.left += this.ratio;
        }
      }
    }
    return true;
  }
}

registerProcessor('mic-capture', MicCapture);
