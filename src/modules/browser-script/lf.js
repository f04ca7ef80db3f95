/*! lf.js: click capture and browser signals for the conversion-tracking API */
// Markup: <script async src="<PUBLIC_BASE_URL>/lf.js" data-key="pk_live_..."></script>
// Optional data-consent="pending": nothing is stored or sent until lf('consent', true).
// Commands, queued by this stub before the file loads and replayed once it has:
//   window.lf = window.lf || function () { (window.lf.q = window.lf.q || []).push(arguments) };
//   lf('observe', { order_id, amount, currency })   thank-you page: sends order.observed
//   lf('consent', true | false)                      start; or forget what was stored and stop
// It never throws into the host page and never sends personal data: only the page's path
// (no query, no fragment), the referring site's host and the click id; no form values, no title.
// Edit this file, then run `node src/modules/browser-script/build-lf.mjs` (the service serves
// the compacted copy it writes to lf-script.generated.ts).
((w, d) => {
  const NAME = '_lf_click';
  // 13 months in seconds. Browsers may cut script-set cookies short; storage is the fallback.
  const MAX_AGE = 396 * 86400;
  const CLICK = /^[\w-]{1,64}$/;
  // <base>/lf.js or <base>/lf.<version>.js; a query or fragment is ignored.
  const SELF = /\/lf(\.[\w-]+)?\.js([?#].*)?$/;
  const previous = w.lf;
  let base = '';
  let key = '';
  // true: may store and send; null: waiting for consent; false: refused.
  let consent = true;
  let held = [];
  let click = '';

  const attempt = (fn) => {
    try {
      return fn();
    } catch {
      return undefined;
    }
  };
  const clickRef = (value) => (typeof value === 'string' && CLICK.test(value) ? value : '');
  const readCookie = () => clickRef(attempt(() => d.cookie.match(/(?:^|;\s*)_lf_click=([^;]*)/)[1]));
  const writeCookie = (value, maxAge) =>
    attempt(() => {
      const secure = w.location.protocol === 'https:' ? '; Secure' : '';
      d.cookie = `${NAME}=${value}; path=/; max-age=${maxAge}; SameSite=Lax${secure}`;
    });
  // localStorage throws in some sandboxes and private modes.
  const storage = (fn) => attempt(() => fn(w.localStorage));

  // The landing URL's lf_click wins; later pages read the cookie, else storage, and repair the other.
  const capture = () => {
    const landed = attempt(() => new URLSearchParams(w.location.search).get('lf_click'));
    click = clickRef(landed) || readCookie() || storage((s) => clickRef(s.getItem(NAME))) || '';
    if (!click) return;
    if (readCookie() !== click) writeCookie(click, MAX_AGE);
    storage((s) => s.setItem(NAME, click));
  };

  const forget = () => {
    click = '';
    writeCookie('', 0);
    storage((s) => s.removeItem(NAME));
  };

  const send = (type, data) => {
    if (consent === null) return held.push([type, data]);
    if (!consent || !key) return;
    if (click) data.click_ref = click;
    // keepalive: a navigation right after (a thank-you page moving on) does not cancel it.
    w.fetch(`${base}/v1/events`, {
      method: 'POST',
      keepalive: true,
      credentials: 'omit',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ type, data }),
    }).catch(() => {});
  };

  const pageView = () => {
    const data = { path: w.location.pathname.slice(0, 1000) };
    const from = attempt(() => new URL(d.referrer).host);
    if (from && from !== w.location.host) data.referrer_host = from;
    send('page.viewed', data);
  };

  const setConsent = (granted) => {
    if (!granted) {
      consent = false;
      held = [];
      forget();
    } else if (consent !== true) {
      consent = true;
      capture();
      const waiting = held;
      held = [];
      for (const [type, data] of waiting) attempt(() => send(type, data));
    }
  };

  // Only these fields of the order are read, so nothing else the page passes along is sent.
  const observe = (order) => {
    if (order?.order_id == null) return;
    const data = { order_id: String(order.order_id), amount: Number(order.amount) };
    if (order.currency) data.currency = String(order.currency);
    send('order.observed', data);
  };

  const lf = (command, argument) => {
    attempt(() => {
      if (command === 'observe') observe(argument);
      else if (command === 'consent') setConsent(argument);
    });
  };

  const thisScript = () => {
    // currentScript is null when run from a callback; then the last tag loading lf.js is this one.
    const current = d.currentScript;
    if (current && SELF.test(current.src)) return current;
    return [...d.getElementsByTagName('script')].reverse().find((s) => SELF.test(s.src));
  };

  attempt(() => {
    if (previous?.loaded) return;
    const script = thisScript();
    if (script) {
      base = script.src.replace(SELF, '');
      key = script.getAttribute('data-key') || '';
      if (script.getAttribute('data-consent') === 'pending') consent = null;
    }
    // Only publishable keys belong in a page; with anything else nothing is sent.
    if (!/^pk_(live|test)_/.test(key)) key = '';
    lf.loaded = true;
    // A page still holding the stub calls window.lf.q.push(arguments): run those at once.
    lf.q = { push: (args) => lf(...args) };
    w.lf = lf;
    if (consent) capture();
    attempt(pageView);
    for (const args of previous?.q || []) lf(...args);
  });
})(window, document);
