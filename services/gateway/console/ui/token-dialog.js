// @ts-check
// The token form: what the API module asks through when the API answers 401 (lib/api.js, setTokenPrompt).

import { TOKEN_KEY } from '../lib/api.js';
import { $ } from './dom.js';

/**
 * Shows the token form; resolves once a token was entered (and kept in this tab's sessionStorage).
 * @param {boolean} rejected the token sent was refused
 * @returns {Promise<void>}
 */
export function askToken(rejected) {
  const dialog = $('auth');
  const form = $('auth-form');
  const input = $('token');
  input.value = '';
  $('auth-error').hidden = !rejected;
  const entered = new Promise((resolve) => {
    form.onsubmit = (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      form.onsubmit = null;
      dialog.close();
      resolve(undefined);
    };
  });
  dialog.showModal();
  return entered;
}
