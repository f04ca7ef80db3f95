import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import type { Request, Response } from 'express';
import vary from 'vary';

/** A response body built once at start (a script, the OpenAPI document), compressed once. */
export interface Precompressed {
  identity: Buffer;
  gzipped: Buffer;
  /** Changes with the bytes; `-gzip` is added for the compressed encoding (a strong ETag per encoding). */
  etag: string;
}

/** `etag` defaults to a hash of the bytes. */
export function precompress(body: string | Buffer, etag?: string): Precompressed {
  const identity = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return {
    identity,
    gzipped: gzipSync(identity, { level: 9 }),
    etag: etag ?? createHash('sha256').update(identity).digest('hex').slice(0, 16),
  };
}

/** Sends it: gzip when the client takes it, a strong ETag per encoding, 304 when fresh. */
export function sendPrecompressed(
  req: Request,
  res: Response,
  body: Precompressed,
  contentType: string,
  cacheControl: string,
): void {
  const gzip = req.acceptsEncodings('gzip', 'identity') === 'gzip';
  vary(res, 'Accept-Encoding');
  res.setHeader('Content-Type', contentType);
  res.setHeader('Cache-Control', cacheControl);
  res.setHeader('ETag', `"${body.etag}${gzip ? '-gzip' : ''}"`);
  if (req.fresh) {
    res.status(304).end();
    return;
  }
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.send(gzip ? body.gzipped : body.identity);
}

export const JAVASCRIPT = 'text/javascript; charset=utf-8';
