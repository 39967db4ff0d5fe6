import { CALLER_RATE } from './caller-line.js';

/** Seeded background noise of one colour, at unit RMS before its gain. */
export class Noise {
  private b = [0, 0, 0, 0, 0, 0, 0];
  private brown = 0;
  private spare: number | undefined;
  private readonly scale: number;

  constructor(
    private readonly kind: 'white' | 'pink' | 'brown',
    private readonly random: () => number,
  ) {
    // the colour's own RMS, measured once, so the gain sets the level exactly
    let sum = 0;
    const n = CALLER_RATE;
    for (let i = 0; i < n; i++) sum += this.raw() ** 2;
    this.scale = 1 / Math.sqrt(sum / n);
  }

  private gaussian(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    const u = Math.max(this.random(), 1e-12);
    const v = this.random();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  private raw(): number {
    const w = this.gaussian();
    if (this.kind === 'white') return w;
    if (this.kind === 'brown') {
      this.brown = (this.brown + 0.02 * w) / 1.02;
      return this.brown;
    }
    // Paul Kellet's pink filter
    const b = this.b;
    b[0] = 0.99886 * b[0]! + w * 0.0555179;
    b[1] = 0.99332 * b[1]! + w * 0.0750759;
    b[2] = 0.969 * b[2]! + w * 0.153852;
    b[3] = 0.8665 * b[3]! + w * 0.3104856;
    b[4] = 0.55 * b[4]! + w * 0.5329522;
    b[5] = -0.7616 * b[5]! - w * 0.016898;
    const out = b[0]! + b[1]! + b[2]! + b[3]! + b[4]! + b[5]! + b[6]! + w * 0.5362;
    b[6] = w * 0.115926;
    return out;
  }

  /** Adds noise at `rms` to the frame. */
  mixInto(pcm: Int16Array, rms: number): void {
    const gain = rms * this.scale;
    for (let i = 0; i < pcm.length; i++) {
      const v = pcm[i]! + this.raw() * gain;
      pcm[i] = Math.max(-32768, Math.min(32767, Math.round(v)));
    }
  }
}
