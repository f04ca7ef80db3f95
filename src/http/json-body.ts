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
}

/**
 * Bodies are JSON whatever the Content-Type says (curl's default form type and sendBeacon's
 * text/plain included), unless `jsonOnly`. An uncompressed UTF-8 body, nearly every request, is
 * read here; a compressed one or another charset goes to body-parser, which inflates, decodes or refuses it (415). Under single events
 * body-parser's generality cost about a tenth of the web process's CPU (docs/benchmarks.md,
 * "Profile notes"); the limits, errors and empty-body rules below are its own.
 */
export function jsonBody(limitBytes: number, { jsonOnly = false }: JsonBodyOptions = {}): RequestHandler {
  const general = express.json({ limit: limitBytes, type: () => true, strict: false });
  return (req, res, next) => {
    // Already read (a route's own larger limit ran first), or no body at all.
    if (req.readableEnded || req.body !== undefined) return next();
    const headers = req.headers;
    if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return next();
    // `Content-Length: 0` (fetch's PUT without a body) carries nothing to refuse.
    const empty = headers['transfer-encoding'] === undefined && Number(headers['content-length']) === 0;
    if (jsonOnly && !empty && !isJsonMediaType(headers['content-type'])) {
      req.resume(); // drained unread, so the answer can be sent
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
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(headers['content-type'] ?? '')?.[1]?.toLowerCase();
    if (
      (encoding !== undefined && encoding.toLowerCase() !== 'identity') ||
      (charset && charset !== 'utf-8')
    ) {
      general(req, res, next);
      return;
    }
    const declared = headers['content-length'] === undefined ? undefined : Number(headers['content-length']);
    if (declared !== undefined && declared > limitBytes) {
      req.resume(); // drained unread, so the answer can be sent
      next(bodyError(413, 'entity.too.large', 'request entity too large'));
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
        req.resume(); // drain what is left, so the answer can be sent
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
      if (received > limitBytes) settle(bodyError(413, 'entity.too.large', 'request entity too large'));
      else text += decoder.write(chunk);
    };
    // Node's parser ends a request only once its Content-Length has arrived.
    const onEnd = () => settle();
    const onAborted = () => settle(bodyError(400, 'request.aborted', 'request aborted'));
    const onError = (err: Error) => settle(err);
    req.on('data', onData).on('end', onEnd).on('aborted', onAborted).on('error', onError);
  };
}
