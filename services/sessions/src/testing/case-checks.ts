import { AppError, type CaseMocks, type Flow } from '@vab/contracts';
import { mockTargets } from '@vab/flow';

/**
 * Refuses mocks for a tool or webhook the flow does not have (a typo would otherwise let the real call
 * through): 400 naming each such field. Checked against the agent's latest flow when a case is written.
 */
export function checkMocks(mocks: CaseMocks | undefined, flow: Flow, prefix: string): void {
  if (!mocks) return;
  const { tools, webhooks } = mockTargets(flow);
  const issues = [
    ...Object.keys(mocks.tools ?? {})
      .filter((name) => !tools.has(name))
      .map((name) => ({
        path: `${prefix}.mocks.tools.${name}`,
        message: `the flow has no tool "${name}" (its MCP nodes select: ${[...tools].join(', ') || 'none'})`,
      })),
    ...Object.keys(mocks.webhooks ?? {})
      .filter((id) => !webhooks.has(id))
      .map((id) => ({
        path: `${prefix}.mocks.webhooks.${id}`,
        message: `the flow has no webhook node "${id}" (it has: ${[...webhooks].join(', ') || 'none'})`,
      })),
  ];
  if (issues.length > 0) {
    throw new AppError('VALIDATION_FAILED', 'a mock names something the flow does not have', { issues });
  }
}
