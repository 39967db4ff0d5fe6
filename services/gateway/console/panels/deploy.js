// @ts-check
// Deploy: put a version live (the deploy pipeline moves it building → live, or failed with its issues), roll
// back by deploying an older version, the live version with its talk page's link and the widget's snippet,
// and the publishable keys the widget is used with (created, listed, revoked). docs/api.md, "The console".

import { agentPath, enc, json } from '../lib/api.js';
import { store } from '../store/store.js';
import { $, el, setStatus, showError, time } from '../ui/dom.js';
import { definePanel } from '../ui/panel.js';

/** How often a deploy in progress is asked for, and for how long at most (its readiness check's own bound). */
const DEPLOY_POLL_MS = 500;
const DEPLOY_WATCH_MS = 60_000;
/** A deploy on its way: the pipeline has not decided yet. */
const MOVING = new Set(['pending', 'building']);

/** The page's link and the widget's snippet point at this origin: the gateway that serves the console. */
const pageUrl = (subdomain) => `${window.location.origin}/live/${enc(subdomain)}`;
const snippetOf = (subdomain, key) =>
  `<script src="${window.location.origin}/live/widget.js" data-agent="${subdomain}" ` +
  `data-key="${key ?? '<publishable key>'}" defer></script>`;

/** The deploys as last loaded (newest first), and the key last created (shown once, in the snippet). */
let deploys = [];
let newKey = '';

function renderLive() {
  const live = deploys.find((d) => d.status === 'live');
  const line = $('deploy-live');
  if (!live) {
    line.replaceChildren('Not live: no deploy answers callers.');
    $('widget-snippet').textContent = '';
    $('widget-box').hidden = true;
    return;
  }
  const link = el(
    'a',
    { href: pageUrl(live.subdomain), target: '_blank', rel: 'noopener' },
    pageUrl(live.subdomain),
  );
  line.replaceChildren(`Live: version ${live.version} (deploy #${live.deployNumber}) · `, link);
  line.dataset.version = String(live.version);
  $('widget-snippet').textContent = snippetOf(live.subdomain, newKey || undefined);
  $('widget-box').hidden = false;
}

function renderDeploys() {
  const live = deploys.find((d) => d.status === 'live');
  $('deploys').replaceChildren(
    ...deploys.slice(0, 8).map((d) => {
      // a failed deploy's reason and the readiness issues a public caller's start would meet
      const failure = d.failure
        ? [
            el('p', { class: 'failure' }, d.failure.reason),
            ...d.failure.issues.map((i) =>
              el('p', { class: 'failure' }, `${i.nodeId ? `${i.nodeId}: ` : ''}${i.message} (${i.code})`),
            ),
          ]
        : [];
      const item = el(
        'li',
        { 'data-deploy-id': d.id, 'data-status': d.status },
        el('span', { class: `verdict verdict-${d.status}` }, d.status),
        ` #${d.deployNumber} · v${d.version} · ${time(d.updatedAt ?? d.createdAt)}`,
        ...failure,
      );
      // roll back: the version of a deploy that was live before, deployed again (seconds: no new build)
      if (live && d.status === 'superseded' && d.version !== live.version) {
        const back = el('button', { type: 'button', class: 'small rollback' }, `Roll back to v${d.version}`);
        back.addEventListener('click', () => void deploy(d.version));
        item.append(' ', back);
      }
      return item;
    }),
  );
  if (deploys.length === 0) $('deploys').replaceChildren(el('li', { class: 'muted' }, 'No deploys yet.'));
  renderLive();
}

function renderVersions() {
  const versions = [...store.versions].sort((a, b) => b.version - a.version);
  $('deploy-version').replaceChildren(
    ...versions.map((v) => el('option', { value: String(v.version) }, `v${v.version}`)),
  );
  $('deploy').disabled = versions.length === 0;
}

async function loadDeploys(agentId, signal = store.agentSignal) {
  deploys = await json('GET', `${agentPath(agentId)}/deploys`, undefined, { signal });
  renderDeploys();
}

/**
 * Deploys `version` (a rollback is an older one) and follows it until the pipeline decides: live, or failed
 * with its readiness issues.
 */
async function deploy(version) {
  const agentId = store.agentId;
  if (!agentId) return;
  const signal = store.agentSignal;
  $('deploy').disabled = true;
  try {
    const created = await json('POST', `${agentPath(agentId)}/deploys`, { version }, { signal });
    setStatus(`Deploy #${created.deployNumber} of v${version}: ${created.status}`);
    const until = Date.now() + DEPLOY_WATCH_MS;
    let current = created;
    while (MOVING.has(current.status) && Date.now() < until) {
      await loadDeploys(agentId, signal);
      current = deploys.find((d) => d.id === created.id) ?? current;
      if (MOVING.has(current.status)) await new Promise((r) => setTimeout(r, DEPLOY_POLL_MS));
    }
    await loadDeploys(agentId, signal);
    current = deploys.find((d) => d.id === created.id) ?? current;
    setStatus(
      `Deploy #${current.deployNumber} of v${version}: ${current.status}`,
      current.status === 'failed',
    );
  } catch (err) {
    showError(err, 'Deploying');
  } finally {
    $('deploy').disabled = false;
  }
}

// ---- publishable keys ---------------------------------------------------------------------------------

async function loadKeys(agentId, signal = store.agentSignal) {
  const { keys } = await json('GET', `${agentPath(agentId)}/public-keys`, undefined, { signal });
  $('keys-list').replaceChildren(
    ...keys.map((k) => {
      const revoked = k.revokedAt !== null;
      const item = el(
        'li',
        { 'data-key-id': k.id, 'data-revoked': String(revoked) },
        el('code', {}, `${k.prefix}…`),
        k.label ? ` ${k.label}` : '',
        ` · ${k.allowedOrigins.join(', ')}`,
        revoked ? ` · revoked ${time(k.revokedAt)}` : '',
      );
      if (!revoked) {
        const revoke = el('button', { type: 'button', class: 'small revoke' }, 'Revoke');
        revoke.addEventListener('click', () => void revokeKey(agentId, k.id));
        item.append(' ', revoke);
      }
      return item;
    }),
  );
  if (keys.length === 0) $('keys-list').replaceChildren(el('li', { class: 'muted' }, 'No keys yet.'));
}

async function createKey(event) {
  event.preventDefault();
  const agentId = store.agentId;
  if (!agentId) return;
  const allowedOrigins = $('key-origins')
    .value.split(/[\s,]+/)
    .map((o) => o.trim())
    .filter(Boolean);
  try {
    const created = await json('POST', `${agentPath(agentId)}/public-keys`, { allowedOrigins });
    newKey = created.key;
    // the key is shown once (only its id is kept): copied from here, or from the snippet
    $('new-key').replaceChildren(
      'New key (copy it now, it is not shown again): ',
      el('code', {}, created.key),
    );
    $('new-key').hidden = false;
    $('key-origins').value = '';
    setStatus(`Publishable key ${created.id} created`);
    renderLive();
    await loadKeys(agentId);
  } catch (err) {
    showError(err, 'Creating the key');
  }
}

async function revokeKey(agentId, keyId) {
  try {
    await json('DELETE', `${agentPath(agentId)}/public-keys/${enc(keyId)}`);
    setStatus(`Publishable key ${keyId} revoked`);
    await loadKeys(agentId);
  } catch (err) {
    showError(err, 'Revoking the key');
  }
}

definePanel({
  name: 'deploy',
  title: 'Deploy',
  mount(section, heading) {
    const deployButton = el('button', { type: 'button', id: 'deploy', class: 'small' }, 'Deploy');
    const versionSelect = el('select', { id: 'deploy-version', 'aria-label': 'Version to deploy' });
    const keyForm = el(
      'form',
      { id: 'key-form', class: 'key-form' },
      el('label', { for: 'key-origins' }, 'Allowed origins (one per line)'),
      el('textarea', {
        id: 'key-origins',
        rows: '2',
        spellcheck: 'false',
        placeholder: 'https://www.example.com',
        required: '',
      }),
      el('button', { type: 'submit', class: 'small' }, 'Create key'),
    );
    section.append(
      el('div', { class: 'row between' }, heading, el('div', { class: 'row' }, versionSelect, deployButton)),
      el('p', { id: 'deploy-live', class: 'deploy-live', 'aria-live': 'polite' }),
      el('ol', { id: 'deploys', class: 'deploys' }),
      el(
        'details',
        { id: 'widget-box', hidden: '' },
        el('summary', {}, 'Widget snippet'),
        el('pre', { class: 'snippet' }, el('code', { id: 'widget-snippet' })),
      ),
      el('h3', {}, 'Publishable keys'),
      el('ul', { id: 'keys-list', class: 'keys-list' }),
      keyForm,
      el('p', { id: 'new-key', class: 'new-key', hidden: '' }),
    );
    store.on('agent', (agent) => {
      deploys = [];
      newKey = '';
      $('deploys').replaceChildren();
      $('keys-list').replaceChildren();
      $('new-key').hidden = true;
      renderVersions();
      renderLive();
      if (!agent) return;
      loadDeploys(agent.id).catch((err) => showError(err, 'Loading the deploys'));
      loadKeys(agent.id).catch((err) => showError(err, 'Loading the publishable keys'));
    });
    deployButton.addEventListener('click', () => void deploy(Number($('deploy-version').value)));
    keyForm.addEventListener('submit', (e) => void createKey(e));
  },
});
