import type { RequestHandler } from 'express';
import { newId } from '../shared/ids.js';

export const assignRequestId: RequestHandler = (req, res, next) => {
  req.requestId = newId('req');
  res.setHeader('Request-Id', req.requestId);
  next();
};
