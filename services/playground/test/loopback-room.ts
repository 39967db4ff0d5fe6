import {
  AudioFrame,
  AudioSource,
  AudioStream,
  ConnectionState,
  DisconnectReason,
  LocalAudioTrack,
  ParticipantKind,
  Room,
  RoomEvent,
  TrackSource,
  type LocalParticipant,
  type RemoteParticipant,
  type TrackPublishOptions,
} from '@livekit/rtc-node';

const MIC_RATE = 16_000;
const FRAME_SAMPLES = MIC_RATE / 100;

/** A stretch of the agent's track that was loud, on the wall clock (ms). */
export interface Heard {
  startedAt: number;
  endedAt: number;
}

/**
 * A real rtc-node `Room` with only its connection to a media server replaced (none can run where the tests
 * do): `connect` "joins" a room holding one caller, whose microphone is a local audio track the test speaks
 * into, and the agent's publications land here instead of on an SFU. Audio crosses rtc-node's own native
 * tracks and streams both ways — the caller's microphone reaches the agent through the `AudioStream` LiveKit's
 * RoomIO opens on the subscribed track, and the test hears the agent through an `AudioStream` on the track
 * RoomIO published — so everything above the connection (RoomIO, its participant linking, its input and output,
 * the session protocol host) is LiveKit's own code on real audio.
 */
export class LoopbackRoom extends Room {
  readonly callerIdentity = 'user-loopback-caller';
  /** What RoomIO and the session protocol did through the agent's participant. */
  readonly seen = {
    attributes: [] as Record<string, string>[],
    textStreams: [] as string[],
    byteStreams: [] as string[],
    byteHandlers: [] as string[],
    /** Stream handlers given up (RoomIO's and the session host's close do). */
    unregistered: [] as string[],
    data: [] as { topic?: string; payload: string }[],
  };
  /** The agent's loud stretches, as heard on its published track. */
  readonly heard: Heard[] = [];
  /** When the caller's current or last utterance began to play into the room (ms). */
  spokeAt: number | undefined;

  private connected = false;
  private readonly mic = new AudioSource(MIC_RATE, 1, 20);
  private readonly micTrack = LocalAudioTrack.createAudioTrack('microphone', this.mic);
  private readonly caller = {
    identity: this.callerIdentity,
    info: { kind: ParticipantKind.STANDARD },
    attributes: {} as Record<string, string>,
    disconnectReason: undefined as DisconnectReason | undefined,
    trackPublications: new Map([
      [
        'TR_caller_mic',
        { sid: 'TR_caller_mic', source: TrackSource.SOURCE_MICROPHONE, track: this.micTrack },
      ],
    ]),
  };
  private speech: Int16Array | undefined;
  private micRunning = false;
  private listening: ReadableStreamDefaultReader<AudioFrame> | undefined;

  override get isConnected(): boolean {
    return this.connected;
  }

  override async connect(): Promise<void> {
    const seen = this.seen;
    const writer = (record: string[], topic: string) => {
      record.push(topic);
      return { write: async () => undefined, close: async () => undefined };
    };
    const local = {
      identity: 'agent-loopback',
      trackPublications: new Map(),
      publishTrack: async (track: LocalAudioTrack, options: TrackPublishOptions) => {
        this.listen(track);
        return { sid: 'TR_agent', track, source: options.source, waitForSubscription: async () => undefined };
      },
      setAttributes: async (attrs: Record<string, string>) => void seen.attributes.push(attrs),
      publishData: async (data: Uint8Array, opts: { topic?: string }) =>
        void seen.data.push({ topic: opts.topic, payload: new TextDecoder().decode(data) }),
      publishTranscription: async () => undefined,
      streamText: async (opts: { topic: string }) => writer(seen.textStreams, opts.topic),
      streamBytes: async (opts: { topic: string }) => writer(seen.byteStreams, opts.topic),
    };
    this.localParticipant = local as unknown as LocalParticipant;
    this.remoteParticipants.set(this.callerIdentity, this.caller as unknown as RemoteParticipant);
    this.connected = true;
    this.micRunning = true;
    void this.pumpMic();
    this.emit(RoomEvent.ConnectionStateChanged, ConnectionState.CONN_CONNECTED);
  }

  override registerByteStreamHandler(
    topic: string,
    callback: Parameters<Room['registerByteStreamHandler']>[1],
  ) {
    this.seen.byteHandlers.push(topic);
    super.registerByteStreamHandler(topic, callback);
  }

  override unregisterByteStreamHandler(topic: string): void {
    this.seen.unregistered.push(topic);
    super.unregisterByteStreamHandler(topic);
  }

  override unregisterTextStreamHandler(topic: string): void {
    this.seen.unregistered.push(topic);
    super.unregisterTextStreamHandler(topic);
  }

  override async disconnect(): Promise<void> {
    if (!this.connected) return;
    this.connected = false;
    this.micRunning = false;
    this.emit(RoomEvent.Disconnected, DisconnectReason.CLIENT_INITIATED);
    this.removeAllListeners();
  }

  /** The caller says `pcm` (16 kHz mono), in real time; resolves once it has all gone into the room. */
  async say(pcm: Int16Array): Promise<void> {
    this.speech = pcm;
    this.spokeAt = undefined;
    while (this.speech) await new Promise((r) => setTimeout(r, 20));
  }

  /** The caller hangs up (as a browser tab closing does: a client-initiated disconnect). */
  leave(): void {
    this.caller.disconnectReason = DisconnectReason.CLIENT_INITIATED;
    this.remoteParticipants.delete(this.callerIdentity);
    this.micRunning = false;
    this.emit(RoomEvent.ParticipantDisconnected, this.caller as unknown as RemoteParticipant);
  }

  /** The microphone sends 10 ms frames in real time (the source's queue paces it): speech, else silence. */
  private async pumpMic(): Promise<void> {
    let at = 0;
    while (this.micRunning) {
      const data = new Int16Array(FRAME_SAMPLES);
      const speech = this.speech;
      if (speech) {
        // the source holds at most its queue (20 ms) ahead of what has played
        this.spokeAt ??= Date.now() + this.mic.queuedDuration;
        data.set(speech.subarray(at, at + FRAME_SAMPLES));
        at += FRAME_SAMPLES;
        if (at >= speech.length) {
          this.speech = undefined;
          at = 0;
        }
      }
      await this.mic.captureFrame(new AudioFrame(data, MIC_RATE, 1, FRAME_SAMPLES));
    }
  }

  /** Hears the agent's track as a subscriber would, and notes when it was loud. */
  private listen(track: LocalAudioTrack): void {
    const reader = new AudioStream(track, { sampleRate: 24_000, numChannels: 1 }).getReader();
    this.listening = reader;
    void (async () => {
      let current: Heard | undefined;
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done || !value) break;
        const now = Date.now();
        let sum = 0;
        for (const s of value.data) sum += s * s;
        const loud = Math.sqrt(sum / value.data.length) > 300;
        const frameMs = (value.samplesPerChannel / value.sampleRate) * 1000;
        if (loud) {
          if (!current) this.heard.push((current = { startedAt: now - frameMs, endedAt: now }));
          current.endedAt = now;
        } else if (current && now - current.endedAt > 300) current = undefined;
      }
    })();
  }

  /** Stops hearing the agent. */
  async close(): Promise<void> {
    this.micRunning = false;
    await this.listening?.cancel().catch(() => undefined);
  }
}
