import { tokenize } from '@livekit/agents';
import { describe, expect, it } from 'vitest';
import {
  boundSpokenText,
  MAX_SPOKEN_SENTENCE,
  MAX_SPOKEN_WORD,
  spokenWords,
  type SpokenTextCut,
} from './spoken-text.js';

/** `text` streamed through the bound in pieces of `piece` characters; what comes out, and what was cut. */
async function spoken(text: string, piece = 7): Promise<{ out: string; cuts: SpokenTextCut[] }> {
  const cuts: SpokenTextCut[] = [];
  const pieces = Array.from({ length: Math.ceil(text.length / piece) }, (_, i) =>
    text.slice(i * piece, (i + 1) * piece),
  );
  let next = 0;
  const source = new ReadableStream<string>({
    pull(controller) {
      const p = pieces[next++];
      if (p === undefined) controller.close();
      else controller.enqueue(p);
    },
  });
  const bound = boundSpokenText((what) => cuts.push(what));
  let out = '';
  for await (const p of (bound as (t: ReadableStream<string>) => ReadableStream<string>)(source)) out += p;
  return { out, cuts };
}

/** What is spoken of the bound's output: its breaks are a pause (` .` and a line break) or a line break. */
const words = (out: string) => out.replace(/ \.\n/g, ' ').replace(/\n/g, ' ');

/** The sentences LiveKit's tokenizer makes of `text`. */
const sentences = (text: string) => new tokenize.basic.SentenceTokenizer().tokenize(text);

describe('the bound on a reply before speech', () => {
  it('leaves an ordinary reply as it is', async () => {
    const reply =
      'Of course! We have appointments on Monday, Tuesday and Wednesday mornings (at 9.30 a.m.). ' +
      'Mr. Smith, Dr. Jones and the team at www.clinic.example.com can see you. Would you like one? ';
    const { out, cuts } = await spoken(reply.repeat(3));
    expect(cuts).toEqual([]);
    // a line break for a space past 500 characters without one (LiveKit's markdown filter is by line)
    expect(out.split('\n').length).toBe(2);
    expect(words(out)).toBe(reply.repeat(3));
  });

  it('cuts a word past its bound, whichever way it streams, and says so once per reply', async () => {
    const word = 'a'.repeat(50_000);
    for (const piece of [3, 50_000]) {
      const { out, cuts } = await spoken(`Here: ${word} and ${word}. Done.`, piece);
      // the run's dot goes with it
      expect(out).toBe(`Here: ${'a'.repeat(MAX_SPOKEN_WORD)} and ${'a'.repeat(MAX_SPOKEN_WORD)} Done.`);
      expect(cuts).toEqual(['word']);
    }
    // dots are part of the run LiveKit's splitter backtracks over
    expect((await spoken('x.'.repeat(1000))).out).toBe('x.'.repeat(MAX_SPOKEN_WORD / 2));
  });

  it('ends a sentence without a sure end at a space past its bound, in a way LiveKit cannot read as an abbreviation', async () => {
    for (const unit of ['the clinic opens at nine ', 'Mr. Dr. St. ', 'a. b. c. ']) {
      const text = unit.repeat(Math.ceil((MAX_SPOKEN_SENTENCE * 4) / unit.length));
      const { out, cuts } = await spoken(text);
      expect(cuts).toEqual(['sentence']);
      const said = sentences(out);
      expect(said.length).toBeGreaterThanOrEqual(4);
      for (const s of said) expect(s.length).toBeLessThanOrEqual(MAX_SPOKEN_SENTENCE + MAX_SPOKEN_WORD);
      // only spaces became breaks: the words are all there
      expect(words(out)).toBe(text);
    }
  });

  it('breaks text written without spaces, and a markdown line that never closes', async () => {
    const cjk = '诊所九点开门'.repeat(400);
    const { out } = await spoken(cjk);
    expect(out.replace(/ \.\n/g, '')).toBe(cjk);
    expect(Math.max(...out.split('\n').map((l) => l.length))).toBeLessThanOrEqual(
      MAX_SPOKEN_SENTENCE + MAX_SPOKEN_WORD + 2,
    );
    // a `[` never closed: LiveKit's markdown filter holds text until a line ends
    const bracket = `[${'see the link '.repeat(300)}`;
    const lines = (await spoken(bracket)).out.split('\n');
    expect(lines.length).toBeGreaterThan(1);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(MAX_SPOKEN_SENTENCE + MAX_SPOKEN_WORD);
  });

  it('counts from sure sentence ends: a reply of ordinary sentences gets no pause however long', async () => {
    const text = 'We open at nine today. Would you like to come? Yes! '.repeat(100);
    const { out, cuts } = await spoken(text);
    expect(cuts).toEqual([]);
    expect(out).not.toContain(' .');
    expect(words(out)).toBe(text);
  });
});

describe('a spoken reply as stored', () => {
  it('keeps each word as speech takes it: a run past MAX_SPOKEN_WORD cut there, the rest as it was', () => {
    const long = 'a'.repeat(MAX_SPOKEN_WORD + 50);
    expect(spokenWords(`Here: ${long} and ${'b'.repeat(MAX_SPOKEN_WORD + 1)}!`)).toBe(
      `Here: ${'a'.repeat(MAX_SPOKEN_WORD)} and ${'b'.repeat(MAX_SPOKEN_WORD)}!`,
    );
    const plain = 'Nothing long here, see you at 7.30 pm.';
    expect(spokenWords(plain)).toBe(plain);
    expect(spokenWords('x'.repeat(1_000_000))).toBe('x'.repeat(MAX_SPOKEN_WORD));
  });
});
