/**
 * Ogg pages (RFC 3533) as a growing Ogg Opus file holds them: where the complete ones end, and the length of
 * audio they hold. A recording is written to its bucket a few complete pages at a time (decision 35), so the
 * chunks stored so far always read as a whole, playable Ogg file.
 */
export interface OggPages {
  /** Bytes of `buf` that are complete pages (from its start). */
  complete: number;
  /** The last complete page's granule position (48 kHz samples), when one was seen with a position. */
  granule: number | undefined;
  /** The OpusHead's pre-skip, when its page is among them. */
  preSkip: number | undefined;
}

const HEADER = 27;

export function oggPages(buf: Buffer): OggPages {
  let pos = 0;
  let granule: number | undefined;
  let preSkip: number | undefined;
  while (pos + HEADER <= buf.length) {
    if (buf.toString('latin1', pos, pos + 4) !== 'OggS') break;
    const segments = buf[pos + 26]!;
    if (pos + HEADER + segments > buf.length) break;
    let body = 0;
    for (let i = 0; i < segments; i++) body += buf[pos + HEADER + i]!;
    const start = pos + HEADER + segments;
    const end = start + body;
    if (end > buf.length) break;
    if (body >= 12 && buf.toString('latin1', start, start + 8) === 'OpusHead')
      preSkip = buf.readUInt16LE(start + 10);
    const position = buf.readBigInt64LE(pos + 6);
    // -1: no packet ends on this page
    if (position >= 0n) granule = Number(position);
    pos = end;
  }
  return { complete: pos, granule, preSkip };
}

/** Milliseconds of audio up to `granule` (48 kHz samples, whatever the input rate) less the pre-skip. */
export function oggMs(granule: number | undefined, preSkip: number | undefined): number | undefined {
  if (granule === undefined || preSkip === undefined || granule <= preSkip) return undefined;
  return Math.round(((granule - preSkip) / 48_000) * 1000);
}
