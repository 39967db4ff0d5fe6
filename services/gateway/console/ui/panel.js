// @ts-check
// Panels: each is one file under panels/ that defines itself here, and one import in main.js. A panel with a
// title gets a section of its own in the side column (in the order of the imports), its heading in place.

import { $, el } from './dom.js';

/**
 * @typedef {object} Panel
 * @property {string} name its class and the id prefix of its heading (`<name>-title`)
 * @property {string} [title] its heading; none: it has no section (it wires controls of the page's own)
 * @property {(section: HTMLElement | null, heading: HTMLElement | null) => void} mount wires it (once)
 */

/** @type {Panel[]} */
const panels = [];

/** @param {Panel} panel */
export function definePanel(panel) {
  panels.push(panel);
}

/** Mounts every panel defined, each in its own section when it has a title. */
export function mountPanels() {
  const slot = $('panels');
  for (const p of panels) {
    if (!p.title) {
      p.mount(null, null);
      continue;
    }
    const heading = el('h2', { id: `${p.name}-title` }, p.title);
    const section = el('section', { class: `panel ${p.name}`, 'aria-labelledby': `${p.name}-title` });
    slot.append(section);
    p.mount(section, heading);
  }
}
