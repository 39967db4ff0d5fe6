// What parsing a bus reply with its contract's response schema costs (BusClient.request), per reply:
// JSON.parse alone against JSON.parse + the schema, for the service-to-service replies (agents.lookup, and
// agents.get with the full fixture flow, the largest one the playground asks for). `node bench/reply-parse.mjs`
import { contract } from '@vab/contracts';
import { fullFlow } from '@vab/testkit';
import { performance } from 'node:perf_hooks';

const now = Date.now();
const replies = {
  'agents.lookup': { id: 'a1', exists: true, archived: false },
  'agents.get': {
    id: 'a1',
    name: 'Bench',
    version: 3,
    createdAt: now,
    updatedAt: now,
    archived: false,
    flow: fullFlow(),
  },
};
const N = 20_000;
for (const [subject, reply] of Object.entries(replies)) {
  const text = JSON.stringify(reply);
  const schema = contract[subject].response;
  const check = schema.safeParse(JSON.parse(text));
  if (!check.success) throw new Error(`${subject}: fixture does not match: ${check.error.message}`);
  const time = (fn) => {
    for (let i = 0; i < 2000; i++) fn();
    const t = performance.now();
    for (let i = 0; i < N; i++) fn();
    return ((performance.now() - t) / N) * 1000;
  };
  const plain = time(() => JSON.parse(text));
  const parsed = time(() => schema.parse(JSON.parse(text)));
  console.log(
    JSON.stringify({
      subject,
      bytes: text.length,
      jsonParseUs: +plain.toFixed(2),
      withSchemaUs: +parsed.toFixed(2),
    }),
  );
}
