import { connect } from '@nats-io/transport-node';
import { busClientOf } from '@vab/bus';
import {
  startOpenAiStub,
  startSpeechStub,
  type OpenAiStub,
  type Script,
  type SpeechStub,
  voiceFlow,
} from '@vab/testkit';
import { api, startStack, type StackOptions } from './stack.js';

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

/**
 * The whole stack with a chat stub and a speech stub of its own, and a bus connection to it (as a service
 * holds one): what a test of voice calls starts with. `close` stops them all, the stack before its models.
 */
export async function startVoiceStack(opts: {
  chat: Script;
  transcribe: (index: number, durationMs: number) => string;
  stack?: StackOptions;
}) {
  const chat: OpenAiStub = await startOpenAiStub(opts.chat);
  const speech: SpeechStub = await startSpeechStub({ transcribe: opts.transcribe });
  const stack = await startStack(opts.stack);
  const nc = await connect({ servers: stack.natsUrl });
  return {
    chat,
    speech,
    /** The clinic's voice flow (testkit `voiceFlow`) with its models at these stubs; `agent`: params of its agent node. */
    flow: (agent?: Record<string, unknown>) =>
      voiceFlow({ chatURL: chat.baseURL, speechURL: speech.baseURL, agent }),
    stack,
    http: api(stack.baseUrl),
    nc,
    bus: busClientOf(nc),
    async close(): Promise<void> {
      await nc.close();
      await stack.close();
      await chat.close();
      await speech.close();
    },
  };
}

export type VoiceStack = Awaited<ReturnType<typeof startVoiceStack>>;
