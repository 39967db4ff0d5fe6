/**
 * How a transport's turns reach a conversation, given by the transport (one object, not a check of the
 * session kind in each place): typed turns (text sessions, test cases) or spoken ones (a LiveKit room, the
 * voice WebSocket — any transport with audio).
 */
export interface ConversationMode {
  readonly name: 'typed' | 'spoken';
  /**
   * LiveKit hears the user (VAD, STT, end of turn) and hands each finished turn to the engine; interim and
   * final transcripts are events as they come. Typed: the transport hands each turn over itself.
   */
  readonly hears: boolean;
  /** The agent speaks: the flow's TTS, STT and turn handling are the agent's. */
  readonly speaks: boolean;
  /**
   * When an agent message is recorded: when said, with the figures LiveKit and the transport measured from
   * the audio; or when the typed turn ends, the last one carrying the turn's figures.
   */
  readonly records: 'when-said' | 'at-turn-end';
  /** `start()` returns before the greeting has played: the client joins (or connects) while it plays. */
  readonly greetsInBackground: boolean;
  /** LiveKit puts its own text output in place when an audio session starts: the reply tap goes in after. */
  readonly tapsAfterStart: boolean;
}

export const TYPED: ConversationMode = {
  name: 'typed',
  hears: false,
  speaks: false,
  records: 'at-turn-end',
  greetsInBackground: false,
  tapsAfterStart: false,
};

export const SPOKEN: ConversationMode = {
  name: 'spoken',
  hears: true,
  speaks: true,
  records: 'when-said',
  greetsInBackground: true,
  tapsAfterStart: true,
};
