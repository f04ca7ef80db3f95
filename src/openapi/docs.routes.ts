import type { Config } from '../config.js';
import { type AnyRoute, route } from '../http/route.js';
import { errorCodes } from '../shared/errors.js';
import { docsPageCsp, renderDocsPage } from './docs-page.js';
import { buildOpenApiDocument } from './document.js';

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
      responses: { 200: { description: 'The OpenAPI 3.1 document (JSON).' } },
      errors: [],
      async handle(_req, res) {
        res.type('application/json').send(json);
      },
    }),
    route({
      method: 'get',
      path: '/docs',
      operationId: 'getDocsPage',
      summary: 'API reference page',
      description:
        'This reference as one self-contained HTML page; `#error-<code>` anchors are the targets of `doc_url`.',
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
  ];
  // The document describes these two routes as well, so it is built after them; handlers only run later.
  const doc = buildOpenApiDocument([...documented, ...routes], config.PUBLIC_BASE_URL);
  const json = JSON.stringify(doc, null, 2);
  const html = renderDocsPage(doc, errorCodes);
  return routes;
}
