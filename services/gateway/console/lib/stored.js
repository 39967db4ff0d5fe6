// @ts-check
// What the page keeps in this tab's sessionStorage.

/**
 * sessionStorage, where it can be used: a reload (or a crash of the page) keeps what is there, but it lives
 * only as long as this tab, is never shared with other tabs and is not left on disk the way localStorage
 * would leave a secret indefinitely. Storage turned off leaves the page working, with nothing kept.
 */
export const stored = {
  /** @param {string} k */
  get: (k) => {
    try {
      return sessionStorage.getItem(k) ?? '';
    } catch {
      return '';
    }
  },
  /** @param {string} k @param {string} v */
  set: (k, v) => {
    try {
      sessionStorage.setItem(k, v);
    } catch {
      // storage off: the box still works, it is just not kept
    }
  },
};
