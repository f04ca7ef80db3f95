import { StringDecoder } from 'node:string_decoder';
import express, { type RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';

/** The media type of a Content-Type header, without its parameters. */
function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';', 1)[0]!.trim().toLowerCase();
}

/** What the request said its body is, short and printable, for the message. */
function describeType(contentType: string | undefined): string {
  const type = mediaType(contentType);
  if (!type) return 'no Content-Type';
  return /^[\w.+-]+\/[\w.+-]+$/.test(type) && type.length <= 80
    ? `Content-Type ${type}`
    : 'another Content-Type';
}

/** An error as body-parser makes it, so error-handler.ts answers both alike. */
function bodyError(status: number, type: string, message: string): Error {
  return Object.assign(new Error(message), { status, type, expose: true });
}

function entityTooLarge(): Error {
  return bodyError(413, 'entity.too.large', 'request entity too large');
}

/** `application/json`, parameters (a charset) allowed; `+json` types are not: nothing here defines one. */
function isJsonMediaType(contentType: string | undefined): boolean {
  return mediaType(contentType) === 'application/json';
}

export interface JsonBodyOptions {
  /**
   * Refuse (415) a body whose Content-Type is not JSON, before reading it. For surfaces a browser
   * sends ambient credentials to (the ops surface): a form or `text/plain` body is what another
   * site's page can send without asking the browser first, an `application/json` one is not.
   */
  jsonOnly?: boolean;
  /** The answer to a body over the limit, instead of the generic 413 (whose message names the secret keys' limits). */
  tooLarge?: () => Error;
  /**
   * When set, a body with a Content-Encoding (other than identity) is refused with it before a
   * byte is read: a few KiB of gzip inflate to megabytes, so only callers trusted with that cost
   * may send one.
   */
  refuseEncoded?: (encoding: string) => Error;
}

/**
 * Bodies are JSON whatever the Content-Type says (curl's default form type and sendBeacon's
 * text/plain included), unless `jsonOnly`. An uncompressed UTF-8 body, nearly every request, is
 * read here; a compressed one or another charset goes to body-parser, which inflates, decodes or refuses it (415). Under single events
 * body-parser's generality cost about a tenth of the web process's CPU (docs/benchmarks.md,
 * "Profile notes"); the limits, errors and empty-body rules below are its own. Mounted after
 * authentication, so a request refused on its credentials is answered with its body unread.
 */
export function jsonBody(
  limitBytes: number,
  { jsonOnly = false, tooLarge = entityTooLarge, refuseEncoded }: JsonBodyOptions = {},
): RequestHandler {
  const parser = express.json({ limit: limitBytes, type: () => true, strict: false });
  const general: RequestHandler =
    tooLarge === entityTooLarge
      ? parser
      : (req, res, next) =>
          parser(req, res, (err?: unknown) =>
            next((err as { type?: string } | undefined)?.type === 'entity.too.large' ? tooLarge() : err),
          );
  return (req, res, next) => {
    // Already read (a route's own larger limit ran first), or no body at all.
    if (req.readableEnded || req.body !== undefined) return next();
    const headers = req.headers;
    if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return next();
    // `Content-Length: 0` (fetch's PUT without a body) carries nothing to refuse.
    const empty = headers['transfer-encoding'] === undefined && Number(headers['content-length']) === 0;
    if (jsonOnly && !empty && !isJsonMediaType(headers['content-type'])) {
      next(
        new AppError(
          'json_content_type_required',
          `A request body here must be JSON, sent with Content-Type: application/json; this one came with ${describeType(headers['content-type'])}.`,
          {
            hint: 'Send the body with `Content-Type: application/json` (curl: `-H "Content-Type: application/json"`).',
          },
        ),
      );
      return;
    }
    const encoding = headers['content-encoding'];
    const encoded = encoding !== undefined && encoding.toLowerCase() !== 'identity';
    if (encoded && refuseEncoded && !empty) {
      next(refuseEncoded(encoding));
      return;
    }
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (encoded || (charset && charset !== 'utf-8')) {
      general(req, res, next);
      return;
    }
    const declared = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    if (declared !== undefined && declared > limitBytes) {
      next(tooLarge());
      return;
    }
    // Decoded as it arrives: one Buffer of a body over 128 KiB turned into a string costs four
    // times as much per byte as its chunks do (V8's cliff; docs/benchmarks.md, "Profile notes").
    const decoder = new StringDecoder('utf8');
    let text = '';
    let received = 0;
    let settled = false;
    const settle = (err?: Error) => {
      if (settled) return;
      settled = true;
      req.off('data', onData).off('end', onEnd).off('aborted', onAborted).off('error', onError);
      if (err) {
        req.resume(); // what else arrives before the answer closes the connection is dropped
        next(err);
        return;
      }
      text += decoder.end();
      try {
        // An empty body is `{}`, as body-parser has it.
        req.body = text.length === 0 ? {} : JSON.parse(text);
      } catch (parseError) {
        next(bodyError(400, 'entity.parse.failed', (parseError as Error).message));
        return;
      }
      next();
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) settle(tooLarge());
      else text += decoder.write(chunk);
    };
    // Node's parser ends a request only once its Content-Length has arrived.
    const onEnd = () => settle();
    const onAborted = () => settle(bodyError(400, 'request.aborted', 'request aborted'));
    const onError = (err: Error) => settle(err);
    req.on('data', onData).on('end', onEnd).on('aborted', onAborted).on('error', onError);
  };
}
