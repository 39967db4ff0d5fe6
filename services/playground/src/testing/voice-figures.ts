import type { VoiceFigures } from '@vab/contracts';

/** The timeline's resolution: one frame of the call's audio (what the caller sends and plays at once). */
export const FRAME_MS = 20;

/** Gaps shorter than this inside one side's speech (between words, between sentences) are still talk. */
const BRIDGE_MS = 300;

/** One caller line as it went out: its first and last audible frame (its pauses inside included). */
export interface LineSpan {
  startFrame: number;
  /** Exclusive. */
  endFrame: number;
  /** Spoken on purpose over the agent (the barge-in behaviour). */
  bargeIn: boolean;
}

/**
 * What the simulated caller sent and heard, frame by frame: whether its own (clean) speech and the agent's
 * played audio were audible, and the power of what the agent received (noise included), from which the figures
 * are made after the call.
 */
export class CallTimeline {
  readonly caller: boolean[] = [];
  readonly agent: boolean[] = [];
  readonly lines: LineSpan[] = [];
  /** Power of the audio the agent received, summed over frames with and without the caller's speech. */
  private readonly power = { speech: 0, speechFrames: 0, quiet: 0, quietFrames: 0 };

  add(callerAudible: boolean, agentAudible: boolean, sentPower?: number): void {
    this.caller.push(callerAudible);
    this.agent.push(agentAudible);
    if (sentPower === undefined) return;
    if (callerAudible) {
      this.power.speech += sentPower;
      this.power.speechFrames++;
    } else {
      this.power.quiet += sentPower;
      this.power.quietFrames++;
    }
  }

  get frames(): number {
    return this.caller.length;
  }

  /** The SNR of the received audio: speech frames' power over the noise's (measured in the caller's silences). */
  measuredSnrDb(): number | null {
    const p = this.power;
    if (p.speechFrames === 0 || p.quietFrames === 0) return null;
    const noise = p.quiet / p.quietFrames;
    const speech = p.speech / p.speechFrames - noise;
    if (noise <= 0 || speech <= 0) return null;
    return Math.round(10 * Math.log10(speech / noise) * 10) / 10;
  }

  figures(opts: { silenceBoundMs: number; heard: string[] }): VoiceFigures {
    return voiceFigures(this, opts);
  }
}

interface Spurt {
  start: number;
  /** Exclusive. */
  end: number;
}

/** Runs of audible frames, gaps shorter than the bridge joined. */
export function spurtsOf(active: boolean[]): Spurt[] {
  const bridge = Math.round(BRIDGE_MS / FRAME_MS);
  const spurts: Spurt[] = [];
  for (let i = 0; i < active.length; i++) {
    if (!active[i]) continue;
    const last = spurts.at(-1);
    if (last && i - last.end < bridge) last.end = i + 1;
    else spurts.push({ start: i, end: i + 1 });
  }
  return spurts;
}

const ms = (frames: number) => Math.round(frames * FRAME_MS);

/**
 * The figures of a call from its timeline. The agent's silences count where the caller waits on the agent: a
 * gap that follows the caller's speech, or that the agent ends — never one inside a caller's line (its own
 * pause) nor one the caller ends after the agent spoke (its own time to answer).
 */
export function voiceFigures(
  t: Pick<CallTimeline, 'caller' | 'agent' | 'lines' | 'measuredSnrDb'>,
  opts: { silenceBoundMs: number; heard: string[] },
): VoiceFigures {
  const frames = t.caller.length;
  const agent = spurtsOf(t.agent);
  const callerTalk = spurtsOf(t.caller);
  const lines = t.lines.filter((l) => l.endFrame > l.startFrame);
  const inLine = (frame: number) => lines.find((l) => frame > l.startFrame && frame < l.endFrame);

  const turns = lines.map((l, i) => {
    const next = lines[i + 1]?.startFrame ?? frames;
    const answer = agent.find((s) => s.start >= l.endFrame && s.start < next);
    return { callerEndMs: ms(l.endFrame), responseMs: answer ? ms(answer.start - l.endFrame) : null };
  });

  let count = 0;
  let totalFrames = 0;
  for (const s of agent) {
    const line = inLine(s.start);
    if (!line) continue;
    count++;
    totalFrames += Math.max(0, Math.min(s.end, line.endFrame) - s.start);
  }

  const bargeIns = lines
    .filter((l) => l.bargeIn)
    .flatMap((l) => {
      const talking = agent.find((s) => s.start <= l.startFrame && s.end > l.startFrame);
      if (!talking) return [];
      return [
        {
          atMs: ms(l.startFrame),
          stopMs: talking.end >= frames ? null : ms(talking.end - l.startFrame),
        },
      ];
    });

  // gaps where neither side is heard, from the call's start to its end
  const events = [
    ...agent.map((s) => ({ ...s, who: 'agent' as const })),
    ...callerTalk.map((s) => ({ ...s, who: 'caller' as const })),
  ].sort((a, b) => a.start - b.start);
  const silences: VoiceFigures['silences'] = [];
  let longest = 0;
  let heardUntil = 0;
  let lastWho: 'agent' | 'caller' | undefined;
  const gap = (from: number, to: number, nextWho: 'agent' | 'caller' | undefined) => {
    if (to <= from) return;
    if (inLine(from) && inLine(from) === inLine(to - 1)) return;
    if (lastWho !== 'caller' && nextWho !== 'agent') return;
    const len = ms(to - from);
    longest = Math.max(longest, len);
    if (len > opts.silenceBoundMs) silences.push({ atMs: ms(from), ms: len });
  };
  for (const e of events) {
    gap(heardUntil, e.start, e.who);
    if (e.end > heardUntil) {
      heardUntil = e.end;
      lastWho = e.who;
    }
  }
  // after the last sound: the caller waits on an agent that never answered
  if (lastWho === 'caller') gap(heardUntil, frames, undefined);

  const talk = (ss: Spurt[]) => ms(ss.reduce((n, s) => n + s.end - s.start, 0));
  return {
    durationMs: ms(frames),
    turns,
    agentInterruptions: { count, totalMs: ms(totalFrames) },
    bargeIns,
    silences,
    silenceBoundMs: opts.silenceBoundMs,
    longestSilenceMs: longest,
    talkMs: { agent: talk(agent), caller: talk(callerTalk) },
    noiseSnrDb: t.measuredSnrDb(),
    heard: opts.heard,
  };
}
