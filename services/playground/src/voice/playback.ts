/** What a playback sink needs from the pipeline it plays. */
export interface PlaybackHooks {
  /** The text of the reply being played (for what an interrupted one keeps). */
  replyText(): string | undefined;
  /** The first audible frame of a segment is out (sent, or played) now. */
  onAudible(at: number): void;
}

/** How speech is paced when nothing better is known: ~14 characters a second (150 words a minute). */
const CHARS_PER_SECOND = 14;

/** The part of a reply heard after `playedMs`, cut at a word: the text an interrupted reply keeps. */
export function heardPart(text: string, playedMs: number, segmentMs: number | undefined): string {
  const share =
    segmentMs && segmentMs > 0
      ? Math.min(1, playedMs / segmentMs)
      : Math.min(1, (playedMs / 1000) * (CHARS_PER_SECOND / Math.max(1, text.length)));
  if (share >= 1) return text;
  const cut = Math.round(text.length * share);
  const space = text.lastIndexOf(' ', cut);
  return (space > 0 ? text.slice(0, space) : '').trimEnd();
}
