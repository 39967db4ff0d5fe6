import { llm } from '@livekit/agents';
import type { BusClient } from '@vab/bus';
import {
  AppError,
  GeneratedTestCase,
  Simulation,
  Subjects,
  type GenerateTestCasesBody,
  type GeneratedTestCases,
} from '@vab/contracts';
import type { CompiledFlow, Step } from '@vab/flow';
import { z } from 'zod';
import type { KeyEnv } from '../models/provider-keys.js';
import type { ModelFactory } from '../models/model-factory.js';
import type { ReadinessCheck } from '../models/readiness.js';
import { CaseModelClient, ModelAnswerError, safeJson } from '../models/model-call.js';

const PROPOSE_TOOL = 'propose_cases';

/** Lenient on the way in: each proposal is checked on its own, and only the ones that fit are returned. */
const Proposals = z.object({ cases: z.array(z.unknown()) });

/**
 * What the model is told a proposal is: the contract's own case (so its bounds, e.g. maxTurns 1–30, reach
 * the model's JSON schema), without the simulator's model, which is the builder's to choose.
 */
export const ProposeCasesParameters = z.object({
  cases: z.array(
    GeneratedTestCase.extend({ simulation: Simulation.pick({ persona: true, goal: true, maxTurns: true }) }),
  ),
});

function describeStep(s: Step): string {
  switch (s.kind) {
    case 'start':
    case 'burst':
    case 'opentalk':
    case 'timer':
    case 'end':
      return `${s.id} (${s.kind}): ${s.command || '(no instruction)'}`;
    case 'ifelse':
      return `${s.id} (if/else): ${s.conditionText} → true: ${s.exits.true}, false: ${s.exits.false}`;
    case 'categorize':
      return `${s.id} (categorize): ${s.command} → ${s.categories.map((c, i) => `${c}: ${s.exits[i]}`).join(', ')}`;
    case 'transfer':
      return `${s.id} (transfer to another agent)`;
  }
}

/** The flow as a model reads it: the agent's instructions, every step with its branches, the tools. */
export function describeFlow(config: CompiledFlow): string {
  const tools = config.tools.flatMap((t) => t.selectedTools);
  return [
    `Agent "${config.agent.name}" (${config.agent.language}): ${config.agent.instructions || '(no instructions)'}`,
    'Steps:',
    ...Object.values(config.steps).map((s) => `- ${describeStep(s)}`),
    `Tools: ${tools.length > 0 ? tools.join(', ') : 'none'}`,
  ].join('\n');
}

/**
 * `POST /api/agents/:id/test-cases/generate`: a model reads the agent's latest flow (steps, branches,
 * categories, tools) and proposes simulated cases — who calls, what they want, what a judge should check.
 * They are returned for the builder to accept; nothing is stored.
 */
export class CaseGenerator {
  constructor(
    private readonly deps: {
      bus: BusClient;
      readiness: ReadinessCheck;
      models: ModelFactory;
      env(): Promise<KeyEnv>;
      busTimeoutMs: number;
      modelTimeoutMs: number;
    },
  ) {}

  async generate(
    agentId: string,
    body: GenerateTestCasesBody,
    requestId: string,
  ): Promise<GeneratedTestCases> {
    const { bus, readiness, models } = this.deps;
    const agent = await bus.request(
      Subjects.agentsGet,
      { id: agentId },
      { timeoutMs: this.deps.busTimeoutMs, requestId },
    );
    const env = await this.deps.env();
    const { config, issues } = readiness.assess(agent.flow, 'text', env);
    if (!config) throw new AppError('FLOW_INVALID', 'the flow cannot run', { details: issues });
    const client = new CaseModelClient(
      models.requireModel(
        { role: 'generator', setting: 'model' },
        body.model,
        config.providers.llm,
        env,
        body.apiKeys,
      ),
      this.deps.modelTimeoutMs,
    );
    const tools = {
      [PROPOSE_TOOL]: llm.tool({
        description: 'Propose the test cases.',
        parameters: ProposeCasesParameters,
        execute: async () => 'ok',
      }),
    };
    const system =
      'You write test cases for a voice agent. Each case is a simulated caller: a persona (who calls, how ' +
      'they talk), a goal (what they want from the call) and maxTurns (1-30), plus criteria a judge checks on ' +
      `the transcript (each a short name and a description). Cover different steps, branches and categories ` +
      `of the flow and its tools, including callers who go off script. Answer only by calling ${PROPOSE_TOOL}.`;
    const ask =
      `${describeFlow(config)}\n\nPropose ${body.count} cases.` +
      (body.focus ? ` Concentrate on: ${body.focus}` : '');
    let answer;
    try {
      answer = await client.complete(
        [
          { role: 'system', content: system },
          { role: 'user', content: ask },
        ],
        tools,
        'required',
      );
    } catch (err) {
      throw new AppError('UPSTREAM_FAILED', 'the model did not propose cases', { cause: err });
    }
    const call = answer.toolCalls.find((c) => c.name === PROPOSE_TOOL);
    const proposals = Proposals.safeParse(call ? safeJson(call.args) : undefined);
    const cases = (proposals.success ? proposals.data.cases : [])
      .flatMap((c) => {
        const parsed = GeneratedTestCase.safeParse(c);
        return parsed.success ? [parsed.data] : [];
      })
      .slice(0, body.count);
    if (cases.length === 0) {
      const raw = call?.args ?? answer.text;
      throw new AppError('UPSTREAM_FAILED', 'the model proposed no valid test cases', {
        details: { raw },
        cause: new ModelAnswerError('no valid proposal', raw),
      });
    }
    return { cases };
  }
}
