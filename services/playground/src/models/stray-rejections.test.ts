import { describe, expect, it } from 'vitest';
import { isLiveKitStrayRejection } from './stray-rejections.js';

describe('stray rejections', () => {
  it("survives only LiveKit's model tasks", () => {
    const livekit = new Error('Connection error.');
    livekit.stack = `Error: Connection error.\n    at ChunkedStream._mainTaskImpl (/app/node_modules/@livekit/agents/dist/tts/tts.js:552:22)`;
    expect(isLiveKitStrayRejection(livekit)).toBe(true);
    const ours = new Error('boom');
    ours.stack = 'Error: boom\n    at handle (/app/services/playground/dist/runtime/conversation.js:10:3)';
    expect(isLiveKitStrayRejection(ours)).toBe(false);
    expect(isLiveKitStrayRejection('text')).toBe(false);
  });
});
