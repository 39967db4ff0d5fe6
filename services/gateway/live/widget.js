// @ts-check
// The widget (docs/api.md, "The talk page and the widget"): any site includes
//   <script src="https://<gateway>/live/widget.js" data-agent="<subdomain>" data-key="<publishable key>" defer></script>
// and gets a talk button. A classic script (a site's own page loads it as it is); its UI is the talk page's
// own (talk-ui.js, loaded from the script's origin as a module) inside a shadow root, so the host page's
// styles and ours do not meet. Calls are made from the host page, so their Origin is the site's, which the
// key's allowed origins are checked against.

(() => {
  const script = /** @type {HTMLScriptElement | null} */ (document.currentScript);
  if (!script) return;
  const base = new URL('.', script.src);
  const subdomain = script.dataset.agent ?? '';
  const key = script.dataset.key;
  const host = document.createElement('div');
  host.className = 'vab-widget';
  // open: the host page can find it (a test, an assistive tool); its styles still do not reach in
  const shadow = host.attachShadow({ mode: 'open' });
  const style = document.createElement('link');
  style.rel = 'stylesheet';
  style.href = new URL('talk.css', base).href;
  shadow.append(style);
  const mount = () => {
    document.body.append(host);
    import(new URL('talk-ui.js', base).href)
      .then(({ mountTalk }) =>
        mountTalk(shadow, {
          subdomain,
          key,
          origin: base.origin,
          title: script.dataset.title ?? 'Talk to us',
        }),
      )
      .catch((err) => {
        const p = document.createElement('p');
        p.className = 'status error';
        p.setAttribute('role', 'alert');
        p.textContent = `The talk button could not load (${err?.message ?? err}): see the site's CSP.`;
        shadow.append(p);
      });
  };
  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount, { once: true });
})();
