import type { Request, Response } from 'express';

/** A script held in memory, precompressed once. */
export interface ScriptBytes {
  identity: Buffer;
  gzipped: Buffer;
  /** Changes with the bytes; `-gzip` is added for the compressed encoding (a strong ETag per encoding). */
  etag: string;
}

/** Sends a script: gzip when the browser takes it, a strong ETag per encoding, 304 when fresh. */
export function sendScript(req: Request, res: Response, script: ScriptBytes, cacheControl: string): void {
  const gzip = req.acceptsEncodings('gzip', 'identity') === 'gzip';
  res.vary('Accept-Encoding');
  res.setHeader('Content-Type', 'text/javascript; charset=utf-8');
  res.setHeader('Cache-Control', cacheControl);
  res.setHeader('ETag', `"${script.etag}${gzip ? '-gzip' : ''}"`);
  if (req.fresh) {
    res.status(304).end();
    return;
  }
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.send(gzip ? script.gzipped : script.identity);
}
