import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route } from '../../http/route.js';
import { AppError } from '../../shared/errors.js';
import { text } from '../../shared/text.js';
import { CURSOR_MAX_LENGTH } from './cursor.js';
import { orderStatuses } from './order.entity.js';
import { OrderOut, orderExample } from './order-out.js';
import { canonicalInstant, getOrder, listOrders } from './orders.service.js';

export const OrderListOut = z
  .object({
    object: z.literal('list'),
    data: z.array(OrderOut),
    has_more: z.boolean(),
    next_cursor: z
      .string()
      .nullable()
      .meta({ description: 'Pass it unchanged as `cursor` to continue. Null means the last page.' }),
  })
  .meta({ id: 'OrderList' });

const limitError = 'must be an integer from 1 to 500';

const instant = (description: string) =>
  z.iso
    .datetime({
      offset: true,
      error: 'must be an ISO 8601 date-time with a UTC offset, e.g. 2026-11-22T00:00:00+09:00',
    })
    .transform(canonicalInstant)
    .optional()
    .meta({ description });

export const OrderListQuery = z.strictObject({
  limit: z.coerce
    .number({ error: limitError })
    .int({ error: limitError })
    .min(1, { error: limitError })
    .max(500, { error: limitError })
    .default(100)
    .meta({ description: 'Page size, 1 to 500.' }),
  // The length is checked with the signature so that any cursor not issued here is `invalid_cursor`;
  // so is one with a NUL (api-v1.md: a bad cursor is `invalid_cursor`): nothing reads it before its signature.
  cursor: z.string().optional().meta({
    description: '`next_cursor` of the previous page, unchanged. Omit it for the first page.',
    maxLength: CURSOR_MAX_LENGTH,
  }),
  'occurred_at[gte]': instant('Only orders with `occurred_at` at or after this instant.'),
  'occurred_at[lt]': instant('Only orders with `occurred_at` before this instant.'),
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
  const { orm, config } = deps;
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
        'A reconciliation view, ascending by (occurred_at, id) and paged by a signed cursor. Omit `cursor` on the first request; while `has_more` is true, pass `next_cursor` unchanged as `cursor` with the same filters. Unattributed orders are included.',
      tag: 'Orders',
      security: 'secret_key',
      refusePublishableKey: cannotReadOrders,
      query: OrderListQuery,
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
      errors: [
        'invalid_api_key',
        'brand_not_active',
        'publishable_key_cannot_read_orders',
        'invalid_cursor',
        'invalid_request_body',
      ],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        const page = await listOrders(
          orm.em.fork(),
          caller,
          {
            limit: query.limit,
            cursor: query.cursor,
            occurredAtGte: query['occurred_at[gte]'],
            occurredAtLt: query['occurred_at[lt]'],
            status: query.status,
          },
          config.SECRET_KEY_BASE,
        );
        res.json({ object: 'list', ...page } satisfies z.input<typeof OrderListOut>);
      },
    }),
  ];
}
