import type { Response } from 'express';
import { jsonArray } from '../shared/json-array.js';

/**
 * `res.status(status).json(body)` for the event routes' answers and every error envelope: the
 * same bytes and Content-Type without express's per-call content-type parsing and charset rewriting.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  // A batch's answers: written in pieces (shared/json-array.ts).
  const text = Array.isArray(body) ? jsonArray(body) : JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
