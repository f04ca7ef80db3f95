import type { Response } from 'express';

/**
 * `res.status(status).json(body)` for the event routes' answers and every error envelope: the
 * same bytes and Content-Type without express's per-call content-type parsing and charset rewriting.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
