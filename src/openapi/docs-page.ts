import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { type Precompressed, precompress } from '../http/precompressed.js';

/**
 * /docs is Redoc (the `redoc` package's standalone bundle, served from here, so the page works
 * offline and behind firewalls) rendering /openapi.json: field tables, a body per event type,
 * curl and SDK samples (`x-codeSamples`), example responses, and the introduction's guide with
 * the error table whose rows `doc_url` points at (`#error-<code>`).
 */
const require = createRequire(import.meta.url);
const redocVersion = (require('redoc/package.json') as { version: string }).version;
const redocBundlePath = require.resolve('redoc/bundles/redoc.standalone.js');

/** Versioned, so the page can let browsers keep it for a year. */
export const redocBundleUrl = `/docs/redoc-${redocVersion}.standalone.js`;

/**
 * The one address off this host the bundle loads: the menu footer's logo. Its `onError` hides the
 * image, so an empty `src` keeps the footer's text link and makes the page ask nothing of a CDN.
 */
const REDOCLY_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

let bundle: Precompressed | undefined;
/** Read and compressed on first use: most processes (tests, workers) never serve it. */
export function redocBundle(): Precompressed {
  if (!bundle) {
    const source = readFileSync(redocBundlePath, 'utf8');
    if (!source.includes(REDOCLY_LOGO))
      throw new Error(`redoc ${redocVersion}: the logo URL moved; update docs-page.ts`);
    bundle = precompress(source.replace(REDOCLY_LOGO, ''));
  }
  return bundle;
}

/**
 * Redoc's markdown links and menu use the URL hash, but `doc_url`'s `#error-<code>` names a row
 * of the error table, which exists only once Redoc has drawn the introduction: scroll to it then.
 */
const init = `(function () {
  var options = {
    expandResponses: '200,201',
    jsonSampleExpandLevel: 4,
    requiredPropsFirst: true,
    pathInMiddlePanel: true,
    theme: { colors: { primary: { main: '#2a4fa8' } }, typography: { fontFamily: 'system-ui, sans-serif', headings: { fontFamily: 'system-ui, sans-serif' } } }
  };
  function showErrorRow() {
    var id = decodeURIComponent(location.hash.slice(1));
    if (id.indexOf('error-') !== 0) return;
    var anchor = document.getElementById(id);
    if (!anchor) return;
    var row = anchor.closest('tr') || anchor;
    row.classList.add('lf-target');
    row.scrollIntoView({ block: 'center' });
  }
  Redoc.init('/openapi.json', options, document.getElementById('redoc'), function () {
    document.documentElement.setAttribute('data-rendered', 'true');
    showErrorRow();
  });
  window.addEventListener('hashchange', showErrorRow);
})();`;

const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/**
 * Redoc injects its styles at run time (styled-components) and searches in a blob: worker; it
 * fetches only /openapi.json. Scripts stay locked to the bundle and the init above.
 */
export const docsPageCsp = [
  "default-src 'none'",
  `script-src 'self' ${hash(init)}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  'worker-src blob:',
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export function renderDocsPage(title: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>body{margin:0}td>code{white-space:nowrap}.lf-target td{background:#fff6d6}</style>
</head>
<body>
<noscript><p>This reference is drawn by JavaScript. Without it, read <a href="/openapi.json">openapi.json</a>, the same content as OpenAPI 3.1.</p></noscript>
<div id="redoc"></div>
<script src="${redocBundleUrl}"></script>
<script>${init}</script>
</body>
</html>
`;
}
