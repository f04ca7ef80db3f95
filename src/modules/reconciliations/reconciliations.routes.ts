import type { Request, RequestHandler } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { allPages, CSV_PAGE, streamCsv, wantsCsv } from '../../http/csv.js';
import { route, secretKeyRequired } from '../../http/route.js';
import { parseOrThrow } from '../../http/validate.js';
import { AppError, type ErrorCode } from '../../shared/errors.js';
import {
  findReconciliation,
  listDifferences,
  listReconciliations,
  toReconciliationOut,
} from './reconciliations.read.js';
import {
  CSV_BYTES_MAX,
  CsvUploadQuery,
  DifferenceList,
  DifferenceOut,
  DifferencesQuery,
  differenceExample,
  JSON_ROWS_MAX,
  ReconciliationBody,
  ReconciliationList,
  ReconciliationListQuery,
  ReconciliationOut,
  ReconciliationParams,
  ResendPage,
  ResendQuery,
  reconciliationExample,
} from './reconciliations.schemas.js';
import { checkBooksPeriod, createReconciliation, csvUpload, jsonUpload } from './reconciliations.service.js';
import { resendPage } from './resend.js';
import { tooLarge } from './upload.js';

const secretKeyForBooks = secretKeyRequired('Reconciliations can only be made and read');
const common: ErrorCode[] = ['invalid_api_key', 'brand_not_active', 'secret_key_required'];
const byId: ErrorCode[] = [...common, 'invalid_request_body', 'reconciliation_not_found'];
const differenceCsvColumns = Object.keys(DifferenceOut.shape);

const mediaType = (req: Request) =>
  (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
export const isCsvUpload = (req: Request) => req.method === 'POST' && mediaType(req) === 'text/csv';

/**
 * The upload's body reader: a CSV upload is streamed by its handler (never buffered here), a JSON
 * one is read by `json` (a limit that fits 10,000 rows).
 */
export function reconciliationUploadBody(json: RequestHandler): RequestHandler {
  return (req, res, next) => (isCsvUpload(req) ? next() : json(req, res, next));
}

/** A JSON upload's envelope; each row is checked in order as it is staged (the first bad line wins). */
const JsonEnvelope = z.strictObject({
  from: ReconciliationBody.shape.from,
  to: ReconciliationBody.shape.to,
  orders: z.array(z.unknown(), { error: 'must be an array of rows' }).max(JSON_ROWS_MAX, {
    error: `must hold at most ${JSON_ROWS_MAX} rows; send larger books as CSV (Content-Type: text/csv)`,
  }),
});

function csvRequest(req: Request) {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity')
    throw new AppError('http_415', 'A CSV upload must be sent uncompressed.', {
      hint: 'Send the CSV without Content-Encoding.',
    });
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i
    .exec(req.headers['content-type'] ?? '')?.[1]
    ?.toLowerCase();
  if (charset && charset !== 'utf-8')
    throw new AppError('http_415', 'A CSV upload must be UTF-8.', {
      hint: 'Send it as text/csv; charset=utf-8.',
    });
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > CSV_BYTES_MAX) throw tooLarge();
}

export function reconciliationRoutes({ orm, config, queues, logger }: AppDeps) {
  const secret = config.SECRET_KEY_BASE;
  return [
    route({
      method: 'post',
      path: '/v1/reconciliations',
      operationId: 'createReconciliation',
      summary: 'Reconcile the brand’s books',
      description:
        "Uploads the brand's orders for a period, `[from, to)` of at most 92 days, and compares them with ours: JSON `{from, to, orders}` (at most 10,000 rows), or CSV (`Content-Type: text/csv`, `from` and `to` in the query, a header line naming the columns in any order, at most 1,000,000 rows and 100 MB), streamed. The upload is checked line by line before the answer: a bad one is refused whole with its first bad line in `param` (`line 1234: amount`), and nothing is kept. Small uploads are compared in the request (`completed`); larger ones in the `reconciliation` job, which sends `reconciliation.completed`. `Idempotency-Key` as on the events endpoints: the same key and upload answer the reconciliation the first made, as it is now.",
      tag: 'Reconciliations',
      security: 'secret_key',
      refusePublishableKey: secretKeyForBooks,
      query: CsvUploadQuery,
      body: ReconciliationBody,
      validatesBodyItself: true,
      headers: z.object({
        'Idempotency-Key': z.string().min(1).max(255).optional().meta({
          description:
            'Makes a retry safe: the same key and upload answer the first reconciliation (24 hours).',
        }),
      }),
      responseHeaders: { 201: ['Idempotent-Replayed'] },
      csvBody: {
        description:
          'The rows as CSV (RFC 4180, UTF-8, a BOM ignored), the first line naming the columns in any order: order_id, status, amount (required), currency, fx_rate, refunded_amount, occurred_at, coupon_code, click_ref, customer_hash, parent_order_id; an empty cell is an absent value. `from` and `to` go in the query. At most 1,000,000 rows and 100 MB.',
        example:
          'order_id,status,amount,refunded_amount,coupon_code\r\nA-1001,paid,39000,0,MINA10\r\nA-1002,cancelled,52000,0,\r\n',
      },
      bodyExample: {
        from: '2026-11-01T00:00:00+09:00',
        to: '2026-11-02T00:00:00+09:00',
        orders: [{ order_id: 'A-1001', status: 'paid', amount: 39000, coupon_code: 'MINA10' }],
      },
      responses: {
        201: {
          description: 'The reconciliation.',
          schema: ReconciliationOut,
          example: reconciliationExample,
        },
      },
      errors: [
        ...common,
        'invalid_request_body',
        'invalid_csv_header',
        'duplicate_order_id',
        'empty_upload',
        'period_too_long',
        'invalid_period',
        'idempotency_key_reused',
      ],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        let upload: ReturnType<typeof jsonUpload>;
        if (isCsvUpload(req)) {
          if (query.from === undefined || query.to === undefined)
            throw new AppError('invalid_request_query', 'A CSV upload needs `from` and `to` in the query.', {
              param: query.from === undefined ? 'from' : 'to',
              hint: 'POST /v1/reconciliations?from=2026-11-01T00:00:00%2B09:00&to=2026-11-02T00:00:00%2B09:00',
            });
          csvRequest(req);
          upload = csvUpload(req, checkBooksPeriod(query.from, query.to));
        } else {
          if (query.from !== undefined || query.to !== undefined)
            throw new AppError(
              'invalid_request_query',
              'A JSON upload carries `from` and `to` in its body; the query takes them for CSV uploads only.',
              { param: query.from !== undefined ? 'from' : 'to' },
            );
          const body = parseOrThrow(JsonEnvelope, req.body ?? {});
          const period = checkBooksPeriod(body.from, body.to);
          if (body.orders.length === 0)
            throw new AppError('empty_upload', 'The upload holds no order rows.', {
              param: 'orders',
              hint: "Send at least one row of the brand's books for the period.",
            });
          upload = jsonUpload(req, body, period);
        }
        const { body, replayed } = await createReconciliation(
          { orm, queues, logger, uploadRowsPerSecond: config.RECONCILIATION_UPLOAD_ROWS_PER_SECOND },
          caller,
          req.requestId,
          upload,
        );
        if (replayed) res.setHeader('Idempotent-Replayed', 'true');
        res.status(201).json(body);
      },
    }),
    route({
      method: 'get',
      path: '/v1/reconciliations',
      operationId: 'listReconciliations',
      summary: 'List reconciliations',
      description: 'The brand’s reconciliations in this mode, newest first, cursor-paged.',
      tag: 'Reconciliations',
      security: 'secret_key',
      refusePublishableKey: secretKeyForBooks,
      query: ReconciliationListQuery,
      responses: {
        200: {
          description: 'One page of reconciliations.',
          schema: ReconciliationList,
          example: { object: 'list', data: [reconciliationExample], has_more: false, next_cursor: null },
        },
      },
      errors: [...common, 'invalid_cursor'],
      async handle(req, res, { query }) {
        const page = await listReconciliations(orm.em.fork(), callerOf(req), query, secret);
        res.json({ object: 'list', ...page } satisfies z.input<typeof ReconciliationList>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/reconciliations/{reconciliation_id}',
      operationId: 'getReconciliation',
      summary: 'Read one reconciliation',
      description: 'Its status, counts per kind of difference, what is fixable and what is at stake.',
      tag: 'Reconciliations',
      security: 'secret_key',
      refusePublishableKey: secretKeyForBooks,
      params: ReconciliationParams,
      responses: {
        200: {
          description: 'The reconciliation.',
          schema: ReconciliationOut,
          example: reconciliationExample,
        },
      },
      errors: byId,
      async handle(req, res, { params }) {
        res.json(
          toReconciliationOut(
            await findReconciliation(orm.em.fork(), callerOf(req), params.reconciliation_id),
          ),
        );
      },
    }),
    route({
      method: 'get',
      path: '/v1/reconciliations/{reconciliation_id}/differences',
      operationId: 'listReconciliationDifferences',
      summary: 'List the differences of a reconciliation',
      description:
        'One row per difference, in the order of the brand’s lines, then our orders the brand lacks; filtered by `kind` and `fixable`, cursor-paged.',
      tag: 'Reconciliations',
      security: 'secret_key',
      refusePublishableKey: secretKeyForBooks,
      params: ReconciliationParams,
      query: DifferencesQuery,
      csv: {
        columns: differenceCsvColumns,
        description:
          'Every difference matching the filters (after `cursor`, if given; `limit` does not apply), as CSV.',
      },
      responses: {
        200: {
          description: 'One page of differences.',
          schema: DifferenceList,
          example: { object: 'list', data: [differenceExample], has_more: false, next_cursor: null },
        },
      },
      errors: [...byId, 'invalid_cursor'],
      async handle(req, res, { params, query }) {
        const caller = callerOf(req);
        const csv = wantsCsv(req);
        const read = (cursor: string | undefined) =>
          listDifferences(
            orm.em.fork(),
            caller,
            params.reconciliation_id,
            { limit: csv ? CSV_PAGE : query.limit, cursor, kind: query.kind, fixable: query.fixable },
            secret,
          );
        const page = await read(query.cursor);
        if (csv)
          return streamCsv(
            res,
            `${params.reconciliation_id}-differences.csv`,
            differenceCsvColumns,
            allPages(page, read),
          );
        res.json({ object: 'list', ...page } satisfies z.input<typeof DifferenceList>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/reconciliations/{reconciliation_id}/resend',
      operationId: 'getReconciliationResend',
      summary: 'The events that fix the differences',
      description:
        'Pages of at most 500 events: send each page’s `data` as `{events: data}` to `POST /v1/events/batch`. Built from our orders as they are when the page is read, in the order that applies them (order.paid, then refund.created, then order.cancelled); refund ids are derived from the order and the refunded total, so sending a page twice, or the resends of two reconciliations of the same books, refunds once. After it is sent, a new reconciliation of the same upload finds no fixable difference.',
      tag: 'Reconciliations',
      security: 'secret_key',
      refusePublishableKey: secretKeyForBooks,
      params: ReconciliationParams,
      query: ResendQuery,
      responses: {
        200: {
          description: 'One page of events.',
          schema: ResendPage,
          example: {
            object: 'list',
            data: [{ type: 'order.paid', data: { order_id: 'A-1002', amount: 52000, currency: 'KRW' } }],
            has_more: false,
            next_cursor: null,
          },
        },
      },
      errors: [...byId, 'invalid_cursor', 'reconciliation_not_completed'],
      async handle(req, res, { params, query }) {
        res.json(
          await resendPage(orm.em.fork(), callerOf(req), params.reconciliation_id, query.cursor, secret),
        );
      },
    }),
  ];
}
