/** A runnable flow: what the compiler makes of a builder's graph, and all the step engine reads. */

export interface LlmConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  temperature?: number | undefined;
  maxTokens?: number | undefined;
  baseURL?: string | undefined;
}

export interface TtsConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  voiceId?: string | undefined;
  /** Provider extras, passed through. */
  extras: Record<string, unknown>;
}

export interface SttConfig {
  nodeId: string;
  provider: string;
  model?: string | undefined;
  language?: string | undefined;
  keyterms?: string[] | undefined;
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
  | { kind: 'transfer'; id: string; targetAgentId: string }
  | { kind: 'end'; id: string; command: string; isLiteral: boolean; post: PostStep[] };

export type StepKind = Step['kind'];

export interface CompiledFlow {
  agent: { id: string; name: string; instructions: string; language: string; allowInterruptions: boolean };
  providers: { llm: LlmConfig; tts: TtsConfig; stt: SttConfig };
  tools: McpConfig[];
  startStepId: string;
  steps: Record<string, Step>;
}

export type FlowIssueCode =
  | 'NO_AGENT'
  | 'MULTIPLE_AGENTS'
  | 'MISSING_LLM'
  | 'MISSING_TTS'
  | 'MISSING_STT'
  | 'HANDLE_TAKEN'
  | 'NO_START'
  | 'MULTIPLE_STARTS'
  | 'AGENT_NOT_CONNECTED_TO_START'
  | 'DUPLICATE_NODE_ID'
  | 'UNKNOWN_NODE_TYPE'
  | 'EDGE_UNKNOWN_NODE'
  | 'EDGE_UNKNOWN_HANDLE'
  | 'EDGE_WRONG_KIND'
  | 'MULTIPLE_NEXT'
  | 'MISSING_NEXT'
  | 'UNREACHABLE_STEP'
  | 'BRANCH_EXIT_UNCONNECTED'
  | 'BRANCH_AFTER_START'
  | 'CATEGORY_HANDLES_MISMATCH'
  | 'NO_EXIT_PATH'
  | 'PARAM_MISSING'
  | 'PARAM_OUT_OF_RANGE';

export interface FlowIssue {
  code: FlowIssueCode;
  message: string;
  nodeId?: string | undefined;
  /** Edges have no id in the builder's format: they are named by their position in `edges`. */
  edgeIndex?: number | undefined;
}

export type CompileResult = { ok: true; config: CompiledFlow } | { ok: false; issues: FlowIssue[] };
