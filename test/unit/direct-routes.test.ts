import express, { type RequestHandler } from 'express';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { serveDirect } from '../../src/http/direct-routes.js';
import { errorHandler } from '../../src/http/error-handler.js';
import { AppError } from '../../src/shared/errors.js';
import { capturingLogger } from '../setup/capturing-logger.js';

/** serveDirect's own error paths, on a bare app with the real error handler (the event routes never take them). */
function appWith(handlers: RequestHandler[]) {
  const { logger, lines } = capturingLogger();
  const app = express();
  const withId: RequestHandler = (req, _res, next) => {
    req.requestId = 'req_direct_test';
    next();
  };
  const answerError = errorHandler('https://api.example.com', logger);
  app.use(answerError);
  serveDirect(app, [{ path: '/direct', handlers: [withId, ...handlers] }], answerError, {
    skip: () => false,
    logger,
  });
  return { app, lines };
}

const envelope = (res: request.Response) => res.body.error as { code: string; request_id: string };

describe('serveDirect', () => {
  it('answers an AppError thrown by a handler in the envelope', async () => {
    const { app } = appWith([
      () => {
        throw new AppError('invalid_request_body', 'Nope.');
      },
    ]);
    const res = await request(app).post('/direct');
    expect(res.status).toBe(422);
    expect(envelope(res)).toMatchObject({ code: 'invalid_request_body', request_id: 'req_direct_test' });
  });

  it('takes a rejected promise as the handler’s error, as express 5 does', async () => {
    const { app, lines } = appWith([
      async () => {
        throw new Error('boom');
      },
    ]);
    const res = await request(app).post('/direct');
    expect(res.status).toBe(500);
    expect(envelope(res).code).toBe('temporary_service_error');
    expect(lines.join('')).toContain('unhandled error while serving request');
  });

  it('answers a 500 envelope, not silence, when every handler passed the request on', async () => {
    const { app, lines } = appWith([(_req, _res, next) => next()]);
    const res = await request(app).post('/direct');
    expect(res.status).toBe(500);
    expect(envelope(res).code).toBe('temporary_service_error');
    expect(lines.join('')).toContain('no handler answered POST /direct');
  });

  it('leaves any other method or path to the router', async () => {
    const { app } = appWith([(_req, res) => void res.end('direct')]);
    app.get('/direct', (_req, res) => void res.send('router'));
    expect((await request(app).get('/direct')).text).toBe('router');
    expect((await request(app).post('/direct')).text).toBe('direct');
  });

  it("gives the handlers node's request and response, with the properties express's router would set", async () => {
    const seen: unknown[] = [];
    const { app } = appWith([
      (req, res) => {
        seen.push(
          typeof res.send,
          typeof req.get,
          req.path,
          req.query,
          req.params,
          req.originalUrl,
          req.baseUrl,
        );
        res.end();
      },
    ]);
    await request(app).post('/direct');
    expect(seen).toEqual(['undefined', 'undefined', '/direct', {}, {}, '/direct', '']);
  });
});
