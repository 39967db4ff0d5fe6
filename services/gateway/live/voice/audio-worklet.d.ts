// The AudioWorkletGlobalScope (https://webaudio.github.io/web-audio-api/#AudioWorkletGlobalScope), which
// TypeScript ships no lib for: just what the console's worklets use, for the checker (never served).

declare class AudioWorkletProcessor {
  readonly port: MessagePort;
  constructor(options?: AudioWorkletNodeOptions);
}

declare function registerProcessor(
  name: string,
  processorCtor: new (options: AudioWorkletNodeOptions) => AudioWorkletProcessor & {
    process(inputs: Float32Array[][], outputs: Float32Array[][]): boolean;
  },
): void;

/** The context's sample rate, in the worklet's scope. */
declare const sampleRate: number;
