import type { BusClient } from '@vab/bus';
import { Subjects, type DeployRecord } from '@vab/contracts';
import { VoiceClient } from '@vab/testkit';
import { expect, vi } from 'vitest';
import type { api } from './stack.js';

/** A deploy's answer to the live page's POST /live/:subdomain/calls (the fields tests read). */
export interface WebCallStarted {
  callId: string;
  audioPath: string;
  audio: unknown;
}

/**
 * Deploys the agent's current version and waits until the deploy is live (a deploy is made live after its
 * answer: its status moves from `starting` on its own).
 */
export async function liveDeploy(
  http: ReturnType<typeof api>,
  agentId: string,
  settings: Record<string, unknown> = {},
): Promise<DeployRecord> {
  const d = (await http.post<DeployRecord>(`/api/agents/${agentId}/deploys`, settings)).body;
  await expect
    .poll(async () => (await http.get<DeployRecord[]>(`/api/agents/${agentId}/deploys`)).body[0]?.status, {
      timeout: 30_000,
    })
    .toBe('live');
  return d;
}

/** A web call of a live deploy as its public page starts one (no builder token), at 16 kHz in 20 ms frames. */
export async function startWebCall(
  baseUrl: string,
  subdomain: string,
): Promise<{ status: number; started: WebCallStarted }> {
  const res = await fetch(`${baseUrl}/live/${subdomain}/calls`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ audio: { sampleRate: 16000, frameMs: 20 } }),
  });
  return { status: res.status, started: (await res.json()) as WebCallStarted };
}

/** Joins a call's audio socket (`audioPath` with its ticket) and waits for the agent's greeting. */
export async function joinCall(baseUrl: string, audioPath: string): Promise<VoiceClient> {
  const client = new VoiceClient({ url: baseUrl.replace(/^http/, 'ws') + audioPath });
  await client.ready;
  await vi.waitFor(() => expect(client.segments.length).toBeGreaterThanOrEqual(1), { timeout: 20_000 });
  return client;
}

/** Says `spoken` (16 kHz PCM) on the call and waits until the agent has answered it. */
export async function sayAndHear(client: VoiceClient, spoken: Int16Array): Promise<void> {
  const before = client.segments.length;
  client.say(spoken);
  await vi.waitFor(() => expect(client.segments.length).toBeGreaterThan(before), { timeout: 30_000 });
}

/** A call's line as the playground appends it. */
export interface CallLine {
  role: 'user' | 'assistant';
  content: string;
}

/**
 * A call held over the bus as the playground holds one: admitted for the live deploy at `subdomain` (a canary's
 * draw included, sticky by `callerKey`), its lines (made from what the admission answered: the version, the
 * deploy), then hung up by the caller. Answers the admission.
 */
export async function holdBusCall(
  bus: BusClient,
  admit: { subdomain: string; callerKey?: string },
  lines: (admitted: { deployId: string; version: number }) => CallLine[],
) {
  const ask = { timeoutMs: 10_000, requestId: 'test' };
  const caller = admit.callerKey ? { addressHash: admit.callerKey } : {};
  const admitted = await bus.request(
    Subjects.callsAdmit,
    { subdomain: admit.subdomain, channel: 'web', caller, callerKey: admit.callerKey, instanceId: 'pg-test' },
    ask,
  );
  const said = lines(admitted);
  const { agentId, callId } = admitted;
  for (const [i, line] of said.entries())
    await bus.request(
      Subjects.callsAppend,
      { agentId, callId, message: { ...line, stepId: 'start', timestamp: Date.now() + i } },
      ask,
    );
  await bus.request(
    Subjects.callsEnd,
    { agentId, callId, endedAt: Date.now() + said.length, endedReason: 'caller_hung_up' },
    ask,
  );
  return admitted;
}
