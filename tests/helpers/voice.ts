/**
 * What a speech stub's STT hears, set per session: `willHear(...)` names the next utterances in order (the
 * stub cannot recognize speech); `transcribe` is the stub's option. Past the named ones it hears nothing.
 */
export function scriptedHearing() {
  let texts: string[] = [];
  let from = 0;
  let next = 0;
  return {
    transcribe: (index: number): string => {
      next = index + 1;
      return texts[index - from] ?? '';
    },
    willHear(...utterances: string[]) {
      texts = utterances;
      from = next;
    },
  };
}
