// @ts-check
// Stored keys: the agent's own provider keys for its live calls (a public caller brings none, and a deploy
// whose models have no key fails its readiness check with MISSING_CREDENTIALS). Sealed by the server: the page
// sends a key once and is shown only that one is set and its last 4 characters. docs/api.md, "The console".

import { agentPath, json } from '../lib/api.js';
import { CREDENTIAL_PROVIDERS } from '../lib/live-contracts.js';
import { store } from '../store/store.js';
import { $, clip, el, setStatus, showError } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/**
 * @typedef {import('../../../../packages/client/src/schema.ts').operations} Ops
 * @typedef {Ops['credentialsStatus']['responses'][200]['content']['application/json']} CredentialStatus
 * @typedef {NonNullable<Ops['credentialsPut']['requestBody']>['content']['application/json']} PutCredentialsBody
 */

/** @param {CredentialStatus} status */
function render(status) {
  const set = Object.entries(status.apiKeys).filter(([, s]) => s?.set);
  $('stored-keys').replaceChildren(
    ...set.map(([provider, s]) => {
      const remove = el('button', { type: 'button', class: 'small' }, 'Remove');
      remove.addEventListener(
        'click',
        () => void put({ apiKeys: { [provider]: null } }, `${provider} key removed`),
      );
      return el('li', { 'data-provider': provider }, `${provider} · …${s?.last4 ?? ''} `, remove);
    }),
  );
  if (set.length === 0) $('stored-keys').replaceChildren(el('li', { class: 'muted' }, 'None stored.'));
}

async function load(agentId) {
  try {
    render(await json('GET', `${agentPath(agentId)}/credentials`, undefined, { signal: store.agentSignal }));
  } catch (err) {
    if (err?.status === 503) {
      // the operator has not set CREDENTIALS_KEY: nothing can be stored here
      $('stored-keys').replaceChildren(el('li', { class: 'muted' }, `Not available: ${err.message}`));
      $('stored-form').hidden = true;
      return;
    }
    showError(err, 'Loading the stored keys');
  }
}

/**
 * @param {PutCredentialsBody} body
 * @param {string} done what the status line says after
 * @returns {Promise<boolean>} stored
 */
async function put(body, done) {
  const agentId = store.agentId;
  if (!agentId) return false;
  try {
    render(await json('PUT', `${agentPath(agentId)}/credentials`, body));
    setStatus(done);
    return true;
  } catch (err) {
    showError(err, 'Storing the keys');
    return false;
  }
}

/** The box's `provider=key` lines, as a PUT's apiKeys (a provider the server does not know answers 400). */
function keysOfBox() {
  /** @type {Record<string, string>} */
  const apiKeys = {};
  for (const raw of $('stored-input').value.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new Error(`"${clip(line, 20)}" is not provider=key`);
    const provider = line.slice(0, eq).trim();
    // said here, before anything is sent: the server would only answer that the body is invalid
    if (!CREDENTIAL_PROVIDERS.includes(provider))
      throw new Error(`"${clip(provider, 20)}" is not a provider (${CREDENTIAL_PROVIDERS.join(', ')})`);
    apiKeys[provider] = line.slice(eq + 1).trim();
  }
  return apiKeys;
}

definePanel({
  name: 'credentials',
  title: 'Keys for callers',
  mount(section, heading) {
    const form = el(
      'form',
      { id: 'stored-form' },
      el(
        'label',
        { for: 'stored-input' },
        `One provider=key per line (${CREDENTIAL_PROVIDERS.join(', ')}); stored sealed, never shown again`,
      ),
      el('textarea', {
        id: 'stored-input',
        rows: '2',
        spellcheck: 'false',
        autocomplete: 'off',
        required: '',
      }),
      el('button', { type: 'submit', class: 'small' }, 'Store keys'),
    );
    section.append(heading, el('ul', { id: 'stored-keys', class: 'keys-list' }), form);
    store.on('agent', (agent) => {
      $('stored-keys').replaceChildren();
      $('stored-input').value = '';
      form.hidden = false;
      if (agent) void load(agent.id);
    });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      let apiKeys;
      try {
        apiKeys = keysOfBox();
      } catch (err) {
        showError(err, 'Storing the keys');
        return;
      }
      // once stored the values leave the page (the box is emptied); a refusal keeps them to be corrected
      void put({ apiKeys }, `Stored: ${Object.keys(apiKeys).join(', ')}`).then((ok) => {
        if (ok) $('stored-input').value = '';
      });
    });
  },
});
