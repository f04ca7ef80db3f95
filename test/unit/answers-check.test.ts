import { describe, expect, it } from 'vitest';
import { type ErrorCode, errorCodes } from '../../src/shared/errors.js';
import { type Answer, type Document, undeclaredAnswers, unprovokedCodes } from '../setup/answers-check.js';

/** The run's checks of what the service answered (test/setup/answers-check.ts), on a small document. */
const doc: Document = {
  paths: {
    '/v1/orders/{order_id}': {
      get: {
        operationId: 'getOrder',
        responses: { '200': {}, '404': { 'x-error-codes': ['order_not_found', 'wrong_host'] } },
      },
    },
    '/v1/orders/export': { get: { operationId: 'exportOrders', responses: { '200': {} } } },
    '/v1/events': {
      post: {
        operationId: 'sendEvent',
        responses: { '200': {}, '429': { 'x-error-codes': ['rate_limit_exceeded'] } },
      },
    },
    '/lf.{version}.js': { get: { operationId: 'getScript', responses: { '200': {} } } },
  },
};

describe('undeclaredAnswers', () => {
  it('names the operation, status and code of each answer its document does not declare, with the files', () => {
    const answers: Answer[] = [
      ['GET', '/v1/orders/A-1', 200, null],
      ['HEAD', '/v1/orders/A-1', 200, null],
      ['GET', '/v1/orders/A-1', 404, 'order_not_found'],
      ['POST', '/v1/events', 429, 'rate_limit_exceeded'],
      // Matched as express matches: any case, a trailing slash.
      ['GET', '/V1/Orders/A-2/', 409, 'idempotency_key_reused'],
      ['GET', '/v1/orders/A-1', 404, 'payout_not_found'],
      // A literal segment wins over a parameter.
      ['GET', '/v1/orders/export', 404, 'order_not_found'],
      ['GET', '/v1/orders/A-1', 304, null],
      // No operation's answers: no route took them, or a preflight.
      ['DELETE', '/v1/orders/A-1', 405, 'http_405'],
      ['GET', '/v1/orders/A-1/x', 404, 'http_404'],
      ['OPTIONS', '/v1/events', 403, 'origin_not_allowed'],
      ['GET', '/healthz', 503, null],
      // A dot in a path is itself, not any character.
      ['GET', '/lfx1234js', 200, null],
      ['GET', '/lf.1234.js', 304, null],
    ];
    const found = undeclaredAnswers(doc, [
      { file: 'test/a.test.ts', answers },
      { file: 'test/b.test.ts', answers: [['GET', '/v1/orders/B-1', 404, 'payout_not_found']] },
    ]);
    expect(Object.fromEntries([...found].map(([what, files]) => [what, [...files]]))).toEqual({
      'getOrder (GET /v1/orders/{order_id}): 409 idempotency_key_reused': ['test/a.test.ts'],
      'getOrder (GET /v1/orders/{order_id}): 404 payout_not_found': ['test/a.test.ts', 'test/b.test.ts'],
      'exportOrders (GET /v1/orders/export): 404 order_not_found': ['test/a.test.ts'],
      'getOrder (GET /v1/orders/{order_id}): 304': ['test/a.test.ts'],
      'getScript (GET /lf.{version}.js): 304': ['test/a.test.ts'],
    });
  });
});

describe('unprovokedCodes', () => {
  const every = Object.keys(errorCodes) as ErrorCode[];
  const answering = (codes: string[]): Answer[] => codes.map((code) => ['GET', '/v1/ping', 400, code]);

  it('lists the codes no answer carried, but those the error table marks notAnswered', () => {
    const marked = every.filter((code) => 'notAnswered' in errorCodes[code]);
    expect(marked).toEqual(['http_500']);
    const answered = every.filter((code) => !marked.includes(code) && code !== 'coupon_code_taken');
    expect(unprovokedCodes([{ file: 'test/a.test.ts', answers: answering(answered) }])).toEqual({
      unprovoked: ['coupon_code_taken'],
      answeredAnyway: [],
    });
  });

  it('lists the codes the table marks notAnswered that were answered', () => {
    expect(unprovokedCodes([{ file: 'test/a.test.ts', answers: answering(every) }])).toEqual({
      unprovoked: [],
      answeredAnyway: ['http_500'],
    });
  });
});
