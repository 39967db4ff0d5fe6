import type { llm } from '@livekit/agents';
import type { EngineAction, SchemaField } from '@vab/flow';
import { z } from 'zod';
import { CaseModelClient, forcedToolCall } from '../models/model-call.js';
import { transcriptText, type Turn } from './transcript.js';

export type { Turn } from './transcript.js';

const STAY = 'none yet';

/**
 * Evaluates a branch with an LLM and a structured answer. Returns the exit index, `stay`, -1 for an answer
 * that names no exit, or `error` when the call failed: the engine decides what each means.
 */
export async function evaluateBranch(
  model: llm.LLM,
  transcript: Turn[],
  action: Extract<EngineAction, { type: 'evaluate_branch' }>,
  timeoutMs: number,
): Promise<number | 'stay' | 'error'> {
  const options = action.allowStay ? [...action.exits, STAY] : action.exits;
  const question =
    action.kind === 'ifelse'
      ? `Does this condition hold for the conversation so far? Condition: ${action.question}`
      : `Classify the conversation so far. ${action.question}`;
  const system =
    'You judge a conversation between a voice agent and a user, and answer only by calling the tool. ' +
    (action.allowStay
      ? `Choose "${STAY}" when the conversation does not show the answer yet.`
      : 'Always choose one option.');
  try {
    const args = await forcedToolCall(
      new CaseModelClient(model, timeoutMs),
      [
        { role: 'system', content: system },
        {
          role: 'user',
          content: `${transcriptText(transcript)}\n\n${question}\nOptions: ${options.map((o) => JSON.stringify(o)).join(', ')}`,
        },
      ],
      { name: 'decide', description: 'Record your decision.', parameters: z.object({ choice: z.string() }) },
    );
    if (action.allowStay && args.choice === STAY) return 'stay';
    return action.exits.indexOf(args.choice);
  } catch {
    return 'error';
  }
}

function fieldSchema(f: SchemaField): z.ZodType {
  const base =
    f.type === 'string'
      ? z.string()
      : f.type === 'int'
        ? z.number().int()
        : f.type === 'float'
          ? z.number()
          : f.type === 'boolean'
            ? z.boolean()
            : f.type === 'list'
              ? z.array(z.string())
              : z.enum((f.options ?? ['']) as [string, ...string[]]);
  // null: the conversation did not say
  return (f.description ? base.describe(f.description) : base).nullable();
}

/** Extracts the schema's fields from the transcript; throws when the model fails (the caller logs it). */
export async function extractStructuredOutput(
  model: llm.LLM,
  transcript: Turn[],
  command: string,
  fields: SchemaField[],
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  return extractFields(new CaseModelClient(model, timeoutMs), transcript, command, fields);
}

/**
 * The one extraction (a `structured_output` step's, a call analysis' data fields): one forced tool call with
 * the fields as its parameters; throws `ModelAnswerError` when the model does not answer with them.
 */
export async function extractFields(
  client: CaseModelClient,
  transcript: Turn[],
  command: string,
  fields: SchemaField[],
): Promise<Record<string, unknown>> {
  const parameters = z.object(Object.fromEntries(fields.map((f) => [f.name, fieldSchema(f)])));
  return forcedToolCall(
    client,
    [
      {
        role: 'system',
        content:
          'You extract data from a finished conversation between a voice agent and a user, and answer only by calling the tool. Use null for what the conversation does not say.',
      },
      { role: 'user', content: `${transcriptText(transcript)}\n\n${command || 'Extract the fields.'}` },
    ],
    { name: 'extract', description: 'Record your answer.', parameters },
  );
}
