import { createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { z } from 'zod';
import { JAVASCRIPT, precompress, sendPrecompressed } from '../../http/precompressed.js';
import { type AnyRoute, route } from '../../http/route.js';
import { text } from '../../shared/text.js';
import { lfScript } from './lf-script.generated.js';

const identity = Buffer.from(lfScript, 'utf8');

/** The content hash naming the immutable URL `/lf.<version>.js`; it changes with every edit of lf.js. */
export const lfScriptVersion = createHash('sha256').update(identity).digest('hex').slice(0, 12);
const script = precompress(identity, lfScriptVersion);

/** Short enough that a fix reaches every shop within minutes; revalidation is a 304 by ETag. */
const SHORT_CACHE = 'public, max-age=300';
const IMMUTABLE_CACHE = 'public, max-age=31536000, immutable';

/**
 * The script as loaded by `<script src>` (gzip, a strong ETag per encoding), with CORP
 * cross-origin (shops are other sites) and CORS `*` so a page may load it with `crossorigin` and
 * `integrity` (SRI needs CORS for another origin's script).
 */
function serveScript(req: Request, res: Response, cacheControl: string): void {
  // Where these bytes live for good: the URL to pin (with `integrity`) instead of /lf.js.
  res.setHeader('Content-Location', `/lf.${lfScriptVersion}.js`);
  res.setHeader('Cross-Origin-Resource-Policy', 'cross-origin');
  res.setHeader('Access-Control-Allow-Origin', '*');
  sendPrecompressed(req, res, script, JAVASCRIPT, cacheControl);
}

/**
 * Served on the API hosts, outside the OpenAPI operations (a script, not an API call); the
 * document's introduction describes it (src/openapi/document.ts).
 */
export function browserScriptRoutes(): AnyRoute[] {
  return [
    route({
      method: 'get',
      path: '/lf.js',
      operationId: 'getBrowserScript',
      summary: 'Browser script (lf.js), cached 5 minutes',
      tag: 'Browser script',
      security: 'none',
      responses: { 200: { description: 'JavaScript; 304 when the ETag matches.' } },
      errors: [],
      async handle(req, res) {
        serveScript(req, res, SHORT_CACHE);
      },
    }),
    route({
      method: 'get',
      path: '/lf.{version}.js',
      operationId: 'getVersionedBrowserScript',
      summary: 'Browser script under its content hash, cached as immutable',
      description:
        'Another version string gets the current script with the short cache of /lf.js: a page pinned to an old URL keeps working, and nothing else is cached long under that name.',
      tag: 'Browser script',
      security: 'none',
      params: z.object({ version: text().max(64) }),
      responses: { 200: { description: 'JavaScript; 304 when the ETag matches.' } },
      errors: ['invalid_request_body'],
      async handle(req, res, { params }) {
        serveScript(req, res, params.version === lfScriptVersion ? IMMUTABLE_CACHE : SHORT_CACHE);
      },
    }),
  ];
}
