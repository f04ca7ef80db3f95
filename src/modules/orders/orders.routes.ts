import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { allPages, CSV_PAGE, streamCsv, wantsCsv } from '../../http/csv.js';
import { queryInstant } from '../../http/query-instant.js';
import { route } from '../../http/route.js';
import { AppError } from '../../shared/errors.js';
import { pageOf, pageQuery } from '../../shared/paging.js';
import { text } from '../../shared/text.js';
import { orderStatuses } from './order.entity.js';
import { OrderOut, orderExample } from './order-out.js';
import { getOrder, listOrders } from './orders.service.js';

export const OrderListOut = pageOf(OrderOut, 'OrderList');
const orderCsvColumns = Object.keys(OrderOut.shape);

export const OrderListQuery = z.strictObject({
  ...pageQuery,
  'occurred_at[gte]': queryInstant(
    'Only orders with `occurred_at` at or after this instant.',
    '2026-11-22T00:00:00+09:00',
  ),
  'occurred_at[lt]': queryInstant(
    'Only orders with `occurred_at` before this instant.',
    '2026-11-23T00:00:00+09:00',
  ),
  status: z.enum(orderStatuses).optional().meta({ description: 'Only orders in this status.' }),
});

export const OrderParams = z.strictObject({
  order_id: text().min(1).max(120).meta({ description: 'The order_id the store sent.' }),
});

export const cannotReadOrders = () =>
  new AppError('publishable_key_cannot_read_orders', 'Orders can only be read with a secret (sk_) key.', {
    hint: 'Call this endpoint from your server with your sk_live_ or sk_test_ key.',
  });

export function orderRoutes(deps: AppDeps) {
  const { orm, config, reads } = deps;
  return [
    route({
      method: 'get',
      path: '/v1/orders/{order_id}',
      operationId: 'getOrder',
      summary: 'Read one order',
      description:
        "The service's recognised state of an order: attribution, commission and refund totals. Money is in KRW; a foreign order keeps what was sent in `original_*`.",
      tag: 'Orders',
      security: 'secret_key',
      refusePublishableKey: cannotReadOrders,
      params: OrderParams,
      responses: { 200: { description: 'The order.', schema: OrderOut, example: orderExample } },
      errors: [
        'invalid_api_key',
        'brand_not_active',
        'publishable_key_cannot_read_orders',
        'order_not_found',
        'invalid_request_body',
      ],
      async handle(req, res, { params }) {
        const caller = callerOf(req);
        res.json(await getOrder(orm.em.fork(), caller, params.order_id));
      },
    }),
    route({
      method: 'get',
      path: '/v1/orders',
      operationId: 'listOrders',
      summary: 'List orders',
      description:
        'A reconciliation view, ascending by (occurred_at, id) and paged by a signed cursor. Omit `cursor` on the first request; while `has_more` is true, pass `next_cursor` unchanged as `cursor` with the same filters. Unattributed orders are included. With `Accept: text/csv` the answer is every order matching the filters (after `cursor`, if given; `limit` does not apply), streamed as one CSV file with the JSON fields as columns.',
      tag: 'Orders',
      security: 'secret_key',
      refusePublishableKey: cannotReadOrders,
      query: OrderListQuery,
      csv: {
        columns: orderCsvColumns,
        description:
          'Every matching order, one row each, the same fields and order as the JSON pages (RFC 4180).',
      },
      responses: {
        200: {
          description: 'One page of orders.',
          schema: OrderListOut,
          example: {
            object: 'list',
            data: [orderExample],
            has_more: true,
            next_cursor: 'eyJvIjoiMjAyNi0xMS0yMlQwMDozMDowMC4wMDBaIn0.c2lnbmF0dXJl',
          },
        },
      },
      errors: ['invalid_api_key', 'brand_not_active', 'publishable_key_cannot_read_orders', 'invalid_cursor'],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        const csv = wantsCsv(req);
        // Paging tolerates a few seconds of lag: the replica when configured (GET /v1/orders/{id} stays on the primary).
        const read = (cursor: string | undefined) =>
          reads!.read((em) =>
            listOrders(
              em,
              caller,
              {
                limit: csv ? CSV_PAGE : query.limit,
                cursor,
                occurredAtGte: query['occurred_at[gte]'],
                occurredAtLt: query['occurred_at[lt]'],
                status: query.status,
              },
              config.SECRET_KEY_BASE,
            ),
          );
        const page = await read(query.cursor);
        if (csv) return streamCsv(res, 'orders.csv', orderCsvColumns, allPages(page, read));
        res.json({ object: 'list', ...page } satisfies z.input<typeof OrderListOut>);
      },
    }),
  ];
}
