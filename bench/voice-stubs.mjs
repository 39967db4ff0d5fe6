#!/usr/bin/env node
// The providers of the voice benchmarks, in a process of their own: the chat stub (answers --reply at once) and
// the speech stub (its TTS runs espeak-ng and sox per request: spawned from here, those forks and their CPU are
// not the measured process's). Prints one JSON line `{ chatURL, speechURL }`, then serves until killed.
import { startSpeechStub } from '@vab/testkit';
import { startModelStub } from './processes.mjs';

const arg = (name, def) => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? def : process.argv[i + 1];
};
const reply = arg('reply', 'Sure, noted.');
const transcript = arg('transcribe', 'I would like to book a table for two.');
const chat = await startModelStub({ reply: () => ({ content: reply }) });
const speech = await startSpeechStub({ transcribe: () => transcript });
console.log(JSON.stringify({ chatURL: chat.url, speechURL: speech.baseURL }));
process.on('SIGTERM', () => process.exit(0));
