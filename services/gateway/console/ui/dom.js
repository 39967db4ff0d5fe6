// @ts-check
// Small DOM helpers and the status line.

import { ApiError } from '../lib/api.js';

/**
 * An element of index.html by its id. Typed loosely on purpose: each id is one known kind of element
 * (an input, a dialog, a details), which the checker could only learn from a cast at every use.
 * @type {(id: string) => any}
 */
export const $ = (id) => document.getElementById(id);
export const SVG_NS = 'http://www.w3.org/2000/svg';

// ---- status and helpers --------------------------------------------------------------------------

export function setStatus(text, error = false) {
  const el = $('status');
  el.textContent = text;
  el.classList.toggle('error', error);
}

export function showError(err, what) {
  if (err?.name === 'AbortError') return;
  const detail = err instanceof ApiError ? `${err.code}: ${err.message}` : String(err?.message ?? err);
  setStatus(`${what} failed — ${detail}`, true);
}

export const ms = (v) => (v === undefined ? '–' : `${Math.round(v)} ms`);
export const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
export const short = (v) => clip(typeof v === 'string' ? v : JSON.stringify(v), 160);
export const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
export const time = (at) => new Date(at).toLocaleTimeString();

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

export function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  node.append(...children);
  return node;
}
