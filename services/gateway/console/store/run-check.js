// @ts-check
// Before a start (a text session or Talk): validate's issues, and the keys the flow needs that the box does
// not hold, asked for here rather than by a failed start.

import { validateFlow } from '../lib/api.js';
import { plural, setStatus } from '../ui/dom.js';
import { askForKeys } from '../ui/run-form.js';
import { store } from './store.js';

/**
 * Whether the flow can start as `sessionType` with these keys; if not, the page says why (the issues at
 * their nodes, the editor open on them; or the keys box open on the keys missing).
 * @param {import('../lib/api.js').Flow} flow
 * @param {Record<string, string> | undefined} apiKeys
 * @param {'text' | 'voice'} sessionType
 * @param {AbortSignal} signal
 */
export async function readyToRun(flow, apiKeys, sessionType, signal) {
  const v = await validateFlow(flow, sessionType, signal);
  store.setIssues(v.issues, v.issues.length > 0);
  if (v.issues.length > 0) {
    store.setFlow(flow);
    setStatus(`The flow cannot run: ${plural(v.issues.length, 'issue')} (see Edit the flow)`, true);
    return false;
  }
  const missing = v.requirements.filter((r) => r.key === 'request' && !apiKeys?.[r.provider]);
  if (missing.length === 0) return true;
  const names = missing.map((r) => r.provider);
  askForKeys(names);
  setStatus(`A key is needed for ${names.join(', ')}`, true);
  return false;
}
