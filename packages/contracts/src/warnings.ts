import { z } from 'zod';

/**
 * Stable codes of the warnings an operator may act on: the `code` field of each pino line at level 40 (warn),
 * as API errors have theirs. Messages may be reworded; a code stays. docs/operations.md › "Warnings" says what
 * each means and what to do (a test keeps the two in step).
 */
export const WarningCode = z.enum([
  // configuration
  'API_OPEN',
  'BODY_LIMIT_ABOVE_BUS_PAYLOAD',
  'ENV_FILE_UNREADABLE',
  'IDEMPOTENCY_STORE_MISSING',
  // infrastructure
  'NATS_STATUS',
  'NATS_INTERNALS_CHANGED',
  'REDIS_ERROR',
  'REDIS_INTERNALS_CHANGED',
  'RATE_LIMIT_REDIS_ERROR',
  'TRACING_EXPORT_PROBLEM',
  'UPSTREAM_FAILED',
  'STOPPED_WITH_REQUESTS_IN_FLIGHT',
  // retention
  'VERSION_RETENTION_SKIPPED',
  'SESSION_RETENTION_FAILED',
  'SESSIONS_ORPHANED',
  'OWNER_SWEEP_FAILED',
  // test runs and deploys
  'DEPLOY_GATE_OVERRIDDEN',
  'ARCHIVE_UNDONE',
  'TEST_CASE_RESTARTED',
  'TEST_RUN_DIFF_NOT_LOADED',
  'TEST_RUN_SWEPT',
  'TEST_RUN_SWEEP_FAILED',
  // playground sessions
  'AT_CAPACITY',
  'INSTANCE_OVERLOADED',
  'SESSION_BEHIND_REAL_TIME',
  'SESSION_START_FAILED',
  'SESSION_CLEANUP_FAILED',
  'MESSAGE_NOT_RECORDED',
  'TEST_SESSION_NOT_CLOSED',
  'AGENT_SESSION_CLOSE_FAILED',
  'STEP_CHANGE_NOT_PUBLISHED',
  'TRANSFER_TARGET_UNRUNNABLE',
  'TRANSFER_TARGET_NOT_LOADED',
  'TRANSFER_FAILED',
  'LIVEKIT_STRAY_REJECTION',
  'VOICE_END_FAILED',
  'VAD_BEHIND_REAL_TIME',
  'VAD_SPEECH_CUT',
  'SPOKEN_TEXT_CUT',
  // what a flow calls
  'FLOW_EGRESS_REFUSED',
  'MCP_SERVER_UNREACHABLE',
  'MCP_TOOL_MISSING',
  'MCP_TOOL_FAILED',
  'STRUCTURED_OUTPUT_FAILED',
  'WEBHOOK_REFUSED',
  'WEBHOOK_FAILED',
  // LiveKit rooms
  'ROOM_REAPED',
  'ROOM_NOT_DELETED',
  'ROOM_REAPER_FAILED',
  'INSTANCES_UNKNOWN',
  // session events and stats
  'SESSION_EVENT_NOT_STORED',
  // quotas
  'CALLER_QUOTA_UNCHECKED',
  // recordings
  'RECORDING_NOT_STARTED',
  'RECORDING_NOT_STORED',
  'RECORDING_AUDIO_DROPPED',
  'RECORDING_NOT_REMOVED',
  'RECORDING_READ_FAILED',
  'SESSION_USAGE_NOT_READ',
  'EVENT_STREAM_CUT_OFF',
  'EVENT_STREAM_FAILED',
  'VERSION_STATS_NOT_LOADED',
]);
export type WarningCode = z.infer<typeof WarningCode>;
