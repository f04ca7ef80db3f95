import type { Config } from '../config.js';
import { JAVASCRIPT, type Precompressed, precompress, sendPrecompressed } from '../http/precompressed.js';
import { type AnyRoute, route } from '../http/route.js';
import { docsPageCsp, redocBundle, redocBundleUrl, renderDocsPage } from './docs-page.js';
import { buildOpenApiDocument } from './document.js';

/** http/precompressed.ts answers a request whose `If-None-Match` names the current ETag so. */
const notModified = { description: 'Not modified: the ETag in `If-None-Match` is current.' };

export function docsRoutes(config: Config, documented: AnyRoute[]): AnyRoute[] {
  const routes: AnyRoute[] = [
    route({
      method: 'get',
      path: '/openapi.json',
      operationId: 'getOpenApiDocument',
      summary: 'OpenAPI document',
      description:
        'This API described as OpenAPI 3.1, generated from the same zod schemas that validate requests.',
      tag: 'Reference',
      security: 'none',
      responses: { 200: { description: 'The OpenAPI 3.1 document (JSON).' }, 304: notModified },
      errors: [],
      async handle(req, res) {
        // Compressed on first use (about 0.5 MB of JSON, a tenth of it gzipped); revalidated by ETag.
        document ??= precompress(JSON.stringify(doc, null, 2));
        sendPrecompressed(req, res, document, 'application/json; charset=utf-8', 'public, max-age=300');
      },
    }),
    route({
      method: 'get',
      path: '/docs',
      operationId: 'getDocsPage',
      summary: 'API reference page',
      description:
        'This reference, drawn by Redoc from /openapi.json: the guide, every operation with field tables, examples and curl and SDK samples, and the error table whose `#error-<code>` rows are the targets of `doc_url`.',
      tag: 'Reference',
      security: 'none',
      responses: { 200: { description: 'An HTML page (`text/html`).' } },
      errors: [],
      async handle(_req, res) {
        res.setHeader('Content-Type', 'text/html; charset=utf-8');
        res.setHeader('Content-Security-Policy', docsPageCsp);
        res.send(html);
      },
    }),
    route({
      method: 'get',
      path: redocBundleUrl,
      operationId: 'getDocsRenderer',
      summary: 'Script of the reference page',
      description: 'The Redoc bundle /docs loads, named by its version and cached as immutable.',
      tag: 'Reference',
      security: 'none',
      responses: { 200: { description: 'JavaScript.' }, 304: notModified },
      errors: [],
      async handle(req, res) {
        sendPrecompressed(req, res, redocBundle(), JAVASCRIPT, 'public, max-age=31536000, immutable');
      },
    }),
  ];
  // The document describes these two routes as well, so it is built after them; handlers only run later.
  const doc = buildOpenApiDocument([...documented, ...routes], config.PUBLIC_BASE_URL);
  let document: Precompressed | undefined;
  const html = renderDocsPage(`${doc.info.title} ${doc.info.version}`);
  return routes;
}
