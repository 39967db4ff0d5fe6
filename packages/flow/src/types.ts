import type { FlowIssue } from '@vab/contracts';

export type { FlowIssue, FlowIssueCode } from '@vab/contracts';

/** A runnable flow: what the compiler makes of a builder's graph, and all the step engine reads. */

export interface LlmConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  baseURL?: string | undefined;
  /** Sent to a provider that takes one (a test attempt's, so it can be run again the same way). */
  seed?: number | undefined;
}

export interface TtsConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  voiceId?: string | undefined;
  baseURL?: string | undefined;
  /** Provider extras, passed through. */
  extras: Record<string, unknown>;
}

export interface SttConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  language?: string | undefined;
  keyterms?: string[] | undefined;
  baseURL?: string | undefined;
  mode: 'file' | 'realtime';
}

export interface McpConfig {
  nodeId: string;
  serverUrl: string;
  authType: 'none' | 'bearer' | 'api_key';
  authValue?: string | undefined;
  selectedTools: string[];
}

export type SchemaFieldType = 'string' | 'int' | 'float' | 'boolean' | 'list' | 'enum';

export interface SchemaField {
  name: string;
  type: SchemaFieldType;
  description?: string | undefined;
  options?: string[] | undefined;
}

export type PostStep =
  | {
      kind: 'structured_output';
      id: string;
      command: string;
      schemaFields: SchemaField[];
      llm?: LlmConfig | undefined;
    }
  | { kind: 'webhook'; id: string; url: string; headers: Record<string, string> };

export type Step =
  | { kind: 'start'; id: string; command: string; isLiteral: boolean; next: string }
  | { kind: 'burst'; id: string; command: string; rounds: number; next: string }
  | { kind: 'opentalk'; id: string; command: string; next: string }
  | { kind: 'timer'; id: string; command: string; durationMs: number; next: string }
  | {
      kind: 'ifelse';
      id: string;
      conditionText: string;
      llm?: LlmConfig | undefined;
      exits: { true: string; false: string };
    }
  | {
      kind: 'categorize';
      id: string;
      command: string;
      categories: string[];
      llm?: LlmConfig | undefined;
      exits: string[];
    }
  /** To another agent of ours (a handoff), or to a person at a phone number (a phone call only). */
  | { kind: 'transfer'; id: string; targetAgentId: string; targetNumber?: undefined }
  | { kind: 'transfer'; id: string; targetNumber: string; targetAgentId?: undefined }
  | { kind: 'end'; id: string; command: string; isLiteral: boolean; post: PostStep[] };

export type StepKind = Step['kind'];

/** The steps that ask a model where the run goes next. */
export type BranchStep = Extract<Step, { kind: 'ifelse' | 'categorize' }>;

/** How the agent takes turns in a voice session (the agent node's turn params). */
export interface TurnSettings {
  allowInterruptions: boolean;
  turnDetection: 'model' | 'vad' | 'stt';
  minEndpointingDelay: number;
  maxEndpointingDelay: number;
  minInterruptionDuration: number;
  minInterruptionWords: number;
  falseInterruptionTimeout: number;
  resumeFalseInterruption: boolean;
  preemptiveGeneration: boolean;
}

export interface CompiledFlow {
  agent: {
    id: string;
    name: string;
    instructions: string;
    language: string;
    /** Said before a voice call is ended by its instance's drain (empty: the server's own). */
    drainGoodbye: string;
    /**
     * The turn settings the agent node names itself; the others are defaults, which a channel may replace with
     * its own (a phone line's). Absent: none named.
     */
    turnSet?: readonly (keyof TurnSettings)[];
  } & TurnSettings;
  providers: { llm: LlmConfig; tts: TtsConfig; stt: SttConfig };
  tools: McpConfig[];
  startStepId: string;
  steps: Record<string, Step>;
}

export type CompileResult = { ok: true; config: CompiledFlow } | { ok: false; issues: FlowIssue[] };
