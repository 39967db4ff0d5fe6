// @ts-check
// The public talk page (docs/api.md, "The talk page and the widget"): served at /live/<subdomain>, and at
// https://<subdomain>.<LIVE_DOMAIN>/ when the operator has a wildcard domain. Its subdomain is read from
// where it was opened; its calls go to this origin, which needs no key.

import { mountTalk } from './talk-ui.js';

/** `/live/<subdomain>` names it; at the root of `<subdomain>.<LIVE_DOMAIN>` the host's first label does. */
function subdomainOf(location) {
  const m = /^\/live\/([^/]+)\/?$/.exec(location.pathname);
  return m ? decodeURIComponent(m[1]) : location.hostname.split('.')[0];
}

const subdomain = subdomainOf(window.location);
document.title = `Talk to ${subdomain}`;
const app = document.getElementById('app');
if (app) mountTalk(app, { subdomain, origin: window.location.origin, title: `Talk to ${subdomain}` });
