// @ts-check
// The run controls a text session and Talk both start from: the version picked, and the provider keys box.

import { stored } from '../lib/stored.js';
import { $, clip } from './dom.js';

/** The keys box is kept in this tab's sessionStorage (lib/stored.js says why not localStorage). */
const KEYS_KEY = 'vab-console-keys';

/** Fills the keys box from this tab's storage, and keeps what is typed there. */
export function mountKeysBox() {
  $('keys').value = stored.get(KEYS_KEY);
  $('keys').addEventListener('input', () => {
    stored.set(KEYS_KEY, $('keys').value);
    $('needs').hidden = true;
  });
}

/** @returns {Record<string, string> | undefined} the keys box, one `provider=key` a line */
export function keysOf() {
  /** @type {Record<string, string>} */
  const keys = {};
  for (const raw of $('keys').value.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`provider keys: "${clip(line, 20)}" is not provider=key`);
    keys[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
  }
  return Object.keys(keys).length > 0 ? keys : undefined;
}

/**
 * A start's body as the run controls say (the version picked, the draft, the keys), and the version it runs
 * (undefined for the draft).
 * @param {{ flow: unknown, version: number } | null} agent the chosen agent
 * @returns {{ body: Record<string, any>, version: number | undefined }}
 */
export function runBody(agent) {
  const choice = $('version').value;
  /** @type {Record<string, any>} */
  const body = {};
  if (choice === 'draft') body.flow = agent?.flow;
  else if (choice !== 'latest') body.version = Number(choice);
  const apiKeys = keysOf();
  if (apiKeys) body.apiKeys = apiKeys;
  return { body, version: body.flow ? undefined : (body.version ?? agent?.version) };
}

/** The keys a flow needs that the box does not hold: said beside the box, which opens for them. */
export function askForKeys(names) {
  $('needs').textContent =
    `This flow needs a key for ${names.join(', ')} (the server has none it may use there): ` +
    `add ${names.map((n) => `${n}=…`).join(', ')} to the provider keys.`;
  $('needs').hidden = false;
  $('keys-box').open = true;
  $('keys').focus();
}
