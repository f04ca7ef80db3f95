import type { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { allPages, CSV_PAGE, streamCsv, wantsCsv } from '../../http/csv.js';
import { route, secretKeyRequired } from '../../http/route.js';
import type { ErrorCode } from '../../shared/errors.js';
import { getPayout, listPayoutLines, listPayouts } from './payouts.read.js';
import {
  PayoutLineList,
  PayoutLineOut,
  PayoutLinesQuery,
  PayoutList,
  PayoutListQuery,
  PayoutOut,
  PayoutParams,
  payoutExample,
} from './payouts.schemas.js';

/** Settlement figures are the brand's books: read from its server, never with a browser's key. */
const secretKeyForSettlement = secretKeyRequired('Payouts can only be read');

const common: ErrorCode[] = ['invalid_api_key', 'brand_not_active', 'secret_key_required'];
/** A path parameter that is not valid (a NUL in it, too long) is refused as the body's fields are. */
const byId: ErrorCode[] = [...common, 'invalid_request_body'];
const nextCursor = 'eyJ2IjoxfQ.c2lnbmF0dXJl';
const payoutCsvColumns = Object.keys(PayoutOut.shape);
const payoutLineCsvColumns = Object.keys(PayoutLineOut.shape);

export function payoutRoutes({ orm, config, reads }: AppDeps) {
  const secret = config.SECRET_KEY_BASE;
  return [
    route({
      method: 'get',
      path: '/v1/payouts',
      operationId: 'listPayouts',
      summary: 'List payouts',
      description:
        "The brand's payouts (live mode only; test keys see none), ascending by creation and paged by a signed cursor like orders. A payout is listed once final, as its payout.created announced it, and never changes after: usually one per creator and run, and one more for each later pass of the run (a retry, an admin rerun) that found more due. `GET /v1/payouts/{payout_id}/lines` lists what it settled.",
      tag: 'Payouts',
      security: 'secret_key',
      refusePublishableKey: secretKeyForSettlement,
      query: PayoutListQuery,
      csv: {
        columns: payoutCsvColumns,
        description:
          'Every payout matching the filters (after `cursor`, if given; `limit` does not apply), one row each, as CSV.',
      },
      responses: {
        200: {
          description: 'One page of payouts.',
          schema: PayoutList,
          example: { object: 'list', data: [payoutExample], has_more: true, next_cursor: nextCursor },
        },
      },
      errors: [...common, 'invalid_cursor'],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        const csv = wantsCsv(req);
        const read = (cursor: string | undefined) =>
          reads!.read((em) =>
            listPayouts(
              em,
              caller,
              {
                limit: csv ? CSV_PAGE : query.limit,
                cursor,
                creatorId: query.creator_id,
                runKey: query.run_key,
              },
              secret,
            ),
          );
        const page = await read(query.cursor);
        if (csv) return streamCsv(res, 'payouts.csv', payoutCsvColumns, allPages(page, read));
        res.json({ object: 'list', ...page } satisfies z.input<typeof PayoutList>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/payouts/{payout_id}',
      operationId: 'getPayout',
      summary: 'Read one payout',
      description:
        'The payout a `payout.created` webhook names, with its totals in KRW: the same as the webhook’s, for good (a payout is final once announced). A payout a run is still paying is not found until it is final.',
      tag: 'Payouts',
      security: 'secret_key',
      refusePublishableKey: secretKeyForSettlement,
      params: PayoutParams,
      responses: { 200: { description: 'The payout.', schema: PayoutOut, example: payoutExample } },
      errors: [...byId, 'payout_not_found'],
      async handle(req, res, { params }) {
        res.json(await getPayout(orm.em.fork(), callerOf(req), params.payout_id));
      },
    }),
    route({
      method: 'get',
      path: '/v1/payouts/{payout_id}/lines',
      operationId: 'listPayoutLines',
      summary: 'List what a payout settled',
      description:
        'Every order the payout paid and every clawback it netted, from the ledger, ascending and cursor-paged. The lines sum to the payout’s `net_amount`; its `order` lines to `commission_amount`, its `clawback` lines to `clawback_amount`.',
      tag: 'Payouts',
      security: 'secret_key',
      refusePublishableKey: secretKeyForSettlement,
      params: PayoutParams,
      query: PayoutLinesQuery,
      csv: {
        columns: payoutLineCsvColumns,
        description: 'Every line of the payout (after `cursor`, if given; `limit` does not apply), as CSV.',
      },
      responses: {
        200: {
          description: 'One page of lines.',
          schema: PayoutLineList,
          example: {
            object: 'list',
            data: [
              {
                id: 'mv_01kc7a2b3c4d5e6f7g8h9j0k1n',
                object: 'payout_line',
                kind: 'order',
                order_id: 'A-1001',
                conversion_id: 'conv_01kc5p8z2q3w4e5r6t7y8u9i0o',
                amount: 7800,
                currency: 'KRW',
              },
            ],
            has_more: false,
            next_cursor: null,
          },
        },
      },
      errors: [...byId, 'payout_not_found', 'invalid_cursor'],
      async handle(req, res, { params, query }) {
        const caller = callerOf(req);
        const csv = wantsCsv(req);
        const read = (cursor: string | undefined) =>
          listPayoutLines(
            orm.em.fork(),
            caller,
            params.payout_id,
            { limit: csv ? CSV_PAGE : query.limit, cursor },
            secret,
          );
        const page = await read(query.cursor);
        if (csv)
          return streamCsv(res, `${params.payout_id}-lines.csv`, payoutLineCsvColumns, allPages(page, read));
        res.json({ object: 'list', ...page } satisfies z.input<typeof PayoutLineList>);
      },
    }),
  ];
}
