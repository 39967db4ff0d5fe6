import type { voice } from '@livekit/agents';
import type { Logger } from 'pino';

type TextTransform = voice.textTransforms.TextTransform;

/**
 * A run of word characters and dots (`[A-Za-z0-9_.]`) longer than this is cut before speech: its first
 * `MAX_SPOKEN_WORD` characters are spoken, the rest is not. LiveKit's sentence splitter is quadratic in such
 * a run (its "website" pattern backtracks over it: 10 KB took 91 ms a call, 40 KB 1.46 s, and its streams call
 * it again on every piece of a reply), so a model that answers one long word held the event loop for good.
 * No word of speech is that long; a URL or an identifier read aloud is cut at its 100th character.
 */
export const MAX_SPOKEN_WORD = 100;

/**
 * Text without a sure sentence end or a line break for this many characters gets one at its next space (or,
 * without a space for `MAX_SPOKEN_WORD` more characters, as in a script written without spaces, where it is).
 * LiveKit's sentence stream and markdown filter keep such text whole and go over all of it again for every
 * piece that comes: a reply of one endless sentence cost them time quadratic in its length. The sentence end
 * is ` .` and a line break (one LiveKit's splitter cannot take for an abbreviation, whatever came before it):
 * a pause, where a reply read aloud would have had one long before.
 */
export const MAX_SPOKEN_SENTENCE = 500;

/** What was changed in a reply's spoken text (once per reply, for the log). */
export type SpokenTextCut = 'word' | 'sentence';

/** `[A-Za-z0-9_.]`, by code (one test per character of a reply). */
const isWordChar = (c: number) =>
  (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 46;
/** What LiveKit's splitter takes for a space after a sentence's `.` (`\s`, ASCII and the common others). */
const isSpace = (c: number) => c === 32 || (c >= 9 && c <= 13) || c === 160 || c === 0x3000;
const isLower = (c: number) => c >= 97 && c <= 122;
const DOT = 46;
const BANG = 33;
const QUESTION = 63;
const NEWLINE = 10;

/**
 * Bounds the work any model text can cost LiveKit's text processing before speech: its markdown and emoji
 * filters, its sentence tokenizers (the pipeline's for a batch TTS, the plugins' own for a streaming one).
 * One pass over each piece as it streams, with no look-back, and what came in one turn of the event loop given
 * on as one piece: the first of the session's `ttsTextTransforms`.
 * The reply's transcript, its events and the model's context take the same word cut (`spokenWords`): what
 * the caller heard, never a megabyte the caller did not hear; the sentence breaks are for speech only.
 */
export function boundSpokenText(onCut?: (what: SpokenTextCut) => void): TextTransform {
  return (text) => {
    let word = 0;
    let sentence = 0;
    let line = 0;
    let prev = 0;
    /** Lowercase letters just before the current character, and whether a `.` came after 4 of them. */
    let lower = 0;
    let dotEndsWord = false;
    /**
     * What came in one turn of the event loop goes on as one piece: every piece costs LiveKit's filters and
     * sentence stream a pass over their buffers, and a model can stream a reply in thousands of pieces of a
     * character or two (one socket read held 400 of them).
     */
    let pending: string[] = [];
    const give = (controller: TransformStreamDefaultController<string>) => {
      if (pending.length === 0) return;
      const piece = pending.join('');
      pending = [];
      try {
        controller.enqueue(piece);
      } catch {
        // the stream was cancelled meanwhile (the reply was interrupted): nothing more is wanted
      }
    };
    const reported = new Set<SpokenTextCut>();
    const cut = (what: SpokenTextCut) => {
      if (reported.has(what)) return;
      reported.add(what);
      onCut?.(what);
    };
    return text.pipeThrough(
      new TransformStream<string, string>({
        transform(chunk, controller) {
          const out: string[] = [];
          let from = 0;
          for (let i = 0; i < chunk.length; i++) {
            const c = chunk.charCodeAt(i);
            const wordChar = isWordChar(c);
            if (wordChar) {
              if (++word > MAX_SPOKEN_WORD) {
                // dropped: this character and the rest of the run
                if (from < i) out.push(chunk.slice(from, i));
                from = i + 1;
                if (word === MAX_SPOKEN_WORD + 1) cut('word');
                continue;
              }
            } else word = 0;
            const space = isSpace(c);
            if (c === NEWLINE) line = 0;
            // sure ends only: `?` and `!` always; `.` and a space after a word of 4+ lowercase letters (no
            // abbreviation, initial, number or domain LiveKit's splitter keeps the dot of)
            if (c === BANG || c === QUESTION || (space && prev === DOT && dotEndsWord)) sentence = 0;
            if (c === DOT) dotEndsWord = lower >= 4;
            lower = isLower(c) ? lower + 1 : 0;
            const long = sentence >= MAX_SPOKEN_SENTENCE || line >= MAX_SPOKEN_SENTENCE;
            if (long && (space || Math.max(sentence, line) >= MAX_SPOKEN_SENTENCE + MAX_SPOKEN_WORD)) {
              const end = sentence >= MAX_SPOKEN_SENTENCE;
              out.push(chunk.slice(from, i), end ? ' .\n' : '\n');
              if (end) cut('sentence');
              // a space becomes the break; any other character stays, after it, and starts the counts again
              from = space ? i + 1 : i;
              sentence = space ? 0 : 1;
              line = sentence;
              word = wordChar ? 1 : 0;
              prev = space ? NEWLINE : c;
              continue;
            }
            sentence++;
            line++;
            prev = c;
          }
          out.push(chunk.slice(from));
          const piece = out.join('');
          if (!piece) return;
          pending.push(piece);
          if (pending.length === 1) setImmediate(() => give(controller));
        },
        flush(controller) {
          give(controller);
        },
      }),
    );
  };
}

/**
 * A spoken reply's text as it is stored, shown and remembered: every run of `[A-Za-z0-9_.]` longer than
 * `MAX_SPOKEN_WORD` cut there, as `boundSpokenText` cuts it before speech. One pass; text without such a run
 * is returned as it is.
 */
export function spokenWords(text: string): string {
  const out: string[] = [];
  /** Where the text not yet copied starts. */
  let from = 0;
  let word = 0;
  for (let i = 0; i < text.length; i++) {
    if (!isWordChar(text.charCodeAt(i))) {
      word = 0;
      continue;
    }
    word++;
    // the run's first MAX_SPOKEN_WORD characters (and what came before them) are kept, the rest skipped
    if (word === MAX_SPOKEN_WORD + 1) out.push(text.slice(from, i));
    if (word > MAX_SPOKEN_WORD) from = i + 1;
  }
  if (out.length === 0) return text;
  out.push(text.slice(from));
  return out.join('');
}

/**
 * The text transforms of every voice session (`ttsTextTransforms`): the bound first (LiveKit's markdown
 * filter is one of the costs it bounds), then LiveKit's defaults. A reply whose spoken text was cut says so
 * in the session's log, once per reply and kind.
 */
export function spokenTextTransforms(log: Logger): TextTransform[] {
  const onCut = (cut: SpokenTextCut) =>
    log.warn(
      { code: 'SPOKEN_TEXT_CUT', cut, maxWord: MAX_SPOKEN_WORD, maxSentence: MAX_SPOKEN_SENTENCE },
      "a reply's text was cut before speech",
    );
  return [boundSpokenText(onCut), 'filter_markdown', 'filter_emoji'];
}
