import type { Handler } from '@vab/bus';
import { compile } from '@vab/flow';

export const flowsValidate = (): Handler<'playground.flows.validate'> => async (flow) => {
  const result = compile(flow);
  return result.ok ? { valid: true, issues: [] } : { valid: false, issues: result.issues };
};
