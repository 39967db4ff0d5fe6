import { describe, expect, it } from 'vitest';
import { decodeMulaw, encodeMulaw, MULAW_SILENCE } from './mulaw.js';

describe('G.711 μ-law', () => {
  it("decodes the standard's reference codes", () => {
    // ITU-T G.711 table 2a: 0xFF and 0x7F are the two zeros, 0x80/0x00 the largest magnitudes
    expect([...decodeMulaw(Uint8Array.from([0xff, 0x7f, 0x80, 0x00, 0xfe, 0x7e, 0xf0, 0x70]))]).toEqual([
      0, 0, 32124, -32124, 8, -8, 120, -120,
    ]);
  });

  it('encodes every code it decodes back to that code (one zero: +0)', () => {
    const codes = Uint8Array.from({ length: 256 }, (_, i) => i);
    const back = encodeMulaw(decodeMulaw(codes));
    for (let i = 0; i < 256; i++) expect(back[i]).toBe(i === 0x7f ? 0xff : i);
    expect(encodeMulaw(Int16Array.from([0]))[0]).toBe(MULAW_SILENCE);
  });

  it('clips beyond its range and keeps the sign', () => {
    expect([...decodeMulaw(encodeMulaw(Int16Array.from([32767, -32768, 32635, -32635])))]).toEqual([
      32124, -32124, 32124, -32124,
    ]);
  });

  it('carries speech-like audio at the ~38 dB a 8-bit logarithmic code gives', () => {
    const pcm = Int16Array.from({ length: 8000 }, (_, i) =>
      Math.round(
        8000 * Math.sin((2 * Math.PI * 440 * i) / 8000) + 3000 * Math.sin((2 * Math.PI * 1234 * i) / 8000),
      ),
    );
    const back = decodeMulaw(encodeMulaw(pcm));
    let signal = 0;
    let noise = 0;
    for (let i = 0; i < pcm.length; i++) {
      signal += pcm[i]! ** 2;
      noise += (pcm[i]! - back[i]!) ** 2;
    }
    const snrDb = 10 * Math.log10(signal / noise);
    expect(snrDb).toBeGreaterThan(33);
    expect(snrDb).toBeLessThan(45);
  });

  it('writes into a given buffer', () => {
    const out = new Uint8Array(4);
    expect(encodeMulaw(Int16Array.from([0, 0, 0, 0]), out)).toBe(out);
    expect([...out]).toEqual([0xff, 0xff, 0xff, 0xff]);
  });
});
