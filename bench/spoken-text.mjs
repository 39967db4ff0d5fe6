// What a model's reply costs LiveKit's text processing before speech (the path of `ttsNode` for a batch TTS:
// the session's text transforms, then LiveKit's sentence stream), for hostile and ordinary replies, streamed in
// pieces as a model streams them. Three setups, alternately:
//   livekit  LiveKit's defaults (filter_markdown, filter_emoji, its basic SentenceTokenizer stream): before
//   bound    the playground's bound first (runtime/spoken-text.ts), then the same: option A, kept
//   splitter LiveKit's filters, then a linear sentence splitter written for this comparison instead of
//            LiveKit's tokenizer: option B
// Prints per setup and input the total time and the longest the event loop was held. A run that goes past
// --cap-ms is stopped and said so (a piece already in LiveKit's filters is not: one can take minutes).
// `node bench/spoken-text.mjs [--sizes 10000,40000,1000000] [--piece 8] [--batch 400]` (build first:
// `npm run build`).
import { tokenize, voice } from '@livekit/agents';
import { performance } from 'node:perf_hooks';
import { ReadableStream } from 'node:stream/web';
import { setImmediate } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { boundSpokenText } from '../services/playground/dist/runtime/spoken-text.js';

const { values } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,40000,1000000,4194304' },
    piece: { type: 'string', default: '8' },
    batch: { type: 'string', default: '400' },
    'cap-ms': { type: 'string', default: '20000' },
    setups: { type: 'string', default: 'livekit,bound,splitter' },
    inputs: { type: 'string', default: 'word-whole,word,run-on,bracket,abbrev,reply' },
  },
});
const PIECE = Number(values.piece);
const CAP_MS = Number(values['cap-ms']);
const BATCH = Number(values.batch);

const lorem = 'the clinic opens at nine and closes at five on weekdays but not on public holidays ';
const reply =
  'Of course. We have appointments on Monday, Tuesday and Wednesday mornings. Would you like me to book ' +
  'one for you? Our doctors can see you for a check up, a vaccination or a longer consultation! ';
const fill = (unit, n) => unit.repeat(Math.ceil(n / unit.length)).slice(0, n);
/** Each input: its text and how it is streamed (one piece, or pieces of --piece characters). */
const INPUTS = {
  'word-whole': (n) => ({ text: 'a'.repeat(n), whole: true }),
  word: (n) => ({ text: 'a'.repeat(n) }),
  'run-on': (n) => ({ text: fill(lorem, n) }),
  bracket: (n) => ({ text: '[' + fill(lorem, n - 1) }),
  abbrev: (n) => ({ text: fill('Mr. Dr. St. ', n) }),
  reply: (n) => ({ text: fill(reply, n) }),
};

/**
 * Option B: a sentence splitter of ours, linear: each piece is scanned once for `.`, `!`, `?` followed by a
 * space; a sentence is given out once it has 20 characters (LiveKit's minimum), or at a space past 500.
 */
class LinearSentenceStream {
  #buf = '';
  #scanned = 0;
  #out = [];
  pushText(text) {
    this.#buf += text;
    for (let i = this.#scanned; i < this.#buf.length; i++) {
      const c = this.#buf[i];
      const end = (c === ' ' && /[.!?]/.test(this.#buf[i - 1] ?? '') && i >= 20) || (c === ' ' && i >= 500);
      if (end) {
        this.#out.push(this.#buf.slice(0, i));
        this.#buf = this.#buf.slice(i + 1);
        i = -1;
      }
    }
    this.#scanned = this.#buf.length;
  }
  flush() {
    if (this.#buf) this.#out.push(this.#buf);
    this.#buf = '';
    this.#scanned = 0;
  }
  get tokens() {
    return this.#out.length;
  }
}

const SETUPS = {
  livekit: { transforms: ['filter_markdown', 'filter_emoji'], tokenizer: 'livekit' },
  bound: { transforms: [boundSpokenText(), 'filter_markdown', 'filter_emoji'], tokenizer: 'livekit' },
  splitter: { transforms: ['filter_markdown', 'filter_emoji'], tokenizer: 'linear' },
};

/**
 * One reply through one setup: total ms, the longest the event loop was held (the pieces come in batches of
 * --batch, a socket read's worth, with the event loop free between them), the longest single push into the
 * sentence stream, sentences out; or stopped once past --cap-ms.
 */
async function run(setup, input) {
  const pieces = input.whole
    ? [input.text]
    : Array.from({ length: Math.ceil(input.text.length / PIECE) }, (_, i) =>
        input.text.slice(i * PIECE, (i + 1) * PIECE),
      );
  const t0 = performance.now();
  let next = 0;
  let stopped = false;
  let heldMs = 0;
  let since = performance.now();
  const source = new ReadableStream({
    async pull(controller) {
      if (next > 0 && next % BATCH === 0) {
        heldMs = Math.max(heldMs, performance.now() - since);
        await setImmediate();
        since = performance.now();
      }
      const p = pieces[next++];
      if (performance.now() - t0 > CAP_MS) stopped = true;
      if (p === undefined || stopped) controller.close();
      else controller.enqueue(p);
    },
  });
  const text = voice.textTransforms.applyTextTransforms(source, setup.transforms);
  const stream =
    setup.tokenizer === 'livekit'
      ? new tokenize.basic.SentenceTokenizer().stream()
      : new LinearSentenceStream();
  let tokens = 0;
  const counting =
    setup.tokenizer === 'livekit'
      ? (async () => {
          for await (const token of stream) if (token) tokens++;
        })()
      : undefined;
  let pushMs = 0;
  for await (const piece of text) {
    const t = performance.now();
    stream.pushText(piece);
    pushMs = Math.max(pushMs, performance.now() - t);
  }
  const t = performance.now();
  stream.flush();
  pushMs = Math.max(pushMs, performance.now() - t);
  heldMs = Math.max(heldMs, performance.now() - since);
  const totalMs = performance.now() - t0;
  if (setup.tokenizer === 'livekit') {
    stream.close?.();
    await Promise.race([counting, new Promise((r) => setTimeout(r, 100))]);
  } else tokens = stream.tokens;
  return {
    totalMs: Math.round(totalMs),
    heldMaxMs: +heldMs.toFixed(1),
    pushMaxMs: +pushMs.toFixed(1),
    tokens,
    ...(stopped ? { stopped: `at ${CAP_MS} ms, ${next} of ${pieces.length} pieces in` } : {}),
  };
}

for (const size of values.sizes.split(',').map(Number)) {
  for (const name of values.inputs.split(',')) {
    const input = INPUTS[name](size);
    for (const setupName of values.setups.split(',')) {
      const r = await run(SETUPS[setupName], input);
      console.log(JSON.stringify({ input: name, chars: size, setup: setupName, ...r }));
    }
  }
}
