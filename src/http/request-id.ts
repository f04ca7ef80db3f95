import type { RequestHandler } from 'express';
import { newRequestId } from '../shared/ids.js';

export const assignRequestId: RequestHandler = (req, res, next) => {
  req.requestId = newRequestId();
  res.setHeader('Request-Id', req.requestId);
  next();
};
