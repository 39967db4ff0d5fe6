// The stub lives in the testkit (shared with the benchmarks); this path stays for the tests that import it.
export {
  clinicScript,
  lastUserText,
  startOpenAiStub,
  systemText,
  textOf,
  type ChatReply,
  type ChatRequest,
  type Script,
} from '@vab/testkit';
