import { voice } from '@livekit/agents';

/**
 * The LiveKit session of a typed conversation (text sessions, and test cases, which run on them).
 *
 * LiveKit's `close()` ends with the user's turn still open: it commits it with the audio detached and
 * `AudioRecognition.commitUserTurn` waits 500 ms for a late transcript from the speech-to-text stream
 * (@livekit/agents 1.9.0 has no option for that wait; Python's has `session_close_transcript_timeout`). A typed
 * session has no audio, so nothing can arrive: the wait was half a second of every close, for nothing. The
 * one public way past that commit is the close reason: LiveKit skips it when a session closes with reason
 * `error` (`shutdown()` takes any reason), and `close()` then joins the close under way. The reason only
 * reaches LiveKit's own Close event and log line, which nothing here reads for a typed session. Voice sessions
 * keep LiveKit's close: a spoken last turn may well still be in flight.
 */
export class TypedAgentSession extends voice.AgentSession {
  constructor() {
    super({ turnHandling: { turnDetection: 'manual' } });
  }

  override async close(): Promise<void> {
    this.shutdown({ drain: false, reason: voice.CloseReason.ERROR });
    await super.close();
  }
}
