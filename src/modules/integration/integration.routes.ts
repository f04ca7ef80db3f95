import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route, secretKeyRequired } from '../../http/route.js';
import { webhookHealth } from '../webhooks/webhooks.service.js';
import {
  checkNames,
  integrationChecklist,
  integrationStatus,
  listMissingOrders,
} from './integration.service.js';

export const IntegrationStatusOut = z
  .object({
    object: z.literal('integration_status'),
    livemode: z.boolean(),
    platform: z.string(),
    clicks_24h: z
      .int()
      .meta({ description: "Clicks on the brand's tracking links (clicks belong to both modes)." }),
    orders_24h: z.int().meta({ description: 'Orders created from order.paid in this mode.' }),
    unattributed_24h: z.int().meta({ description: 'Of those, orders no creator was credited for.' }),
    missing_orders_24h: z.int().meta({
      description:
        'Orders a browser observed (order.observed) with no order.paid after the gap delay; list them at /v1/integration/missing_orders.',
    }),
    last_event_at: z.iso.datetime().nullable().meta({ description: 'When the last accepted event arrived.' }),
    last_error_code: z
      .string()
      .nullable()
      .meta({ description: 'Error code of the last failed ingestion request in the last 24 hours.' }),
    consecutive_failures: z
      .int()
      .meta({ description: 'Failed ingestion requests since the last accepted event.' }),
    checklist: z
      .array(
        z
          .object({
            check: z.enum(checkNames),
            status: z.enum(['pass', 'fail']),
            hint: z.string().meta({ description: 'What the check means and what to do when it fails.' }),
          })
          .meta({ id: 'IntegrationCheck' }),
      )
      .meta({
        description:
          "The checks to pass before going live, always in this order: a live order.paid in the last 24 hours (live mode whatever the key), click_ref on some order in 24 hours, refunds or cancellations in 7 days, the browser script seen in 24 hours, missing orders at most 1% of the day's orders, no failure since the last accepted request.",
      }),
    webhooks: z
      .object({
        endpoints_enabled: z.int(),
        endpoints_failing: z
          .array(z.object({ id: z.string(), url: z.string(), failing_since: z.iso.datetime() }))
          .meta({
            description: 'Enabled endpoints whose deliveries fail; disabled 3 days after `failing_since`.',
          }),
        endpoints_disabled_by_failures: z
          .array(z.object({ id: z.string(), url: z.string(), disabled_at: z.iso.datetime() }))
          .meta({
            description:
              'Endpoints the service disabled after 3 days of failed deliveries: fix the receiver, then PATCH them with `status: enabled`.',
          }),
      })
      .meta({ description: "The webhook endpoints of the key's mode and their health." }),
  })
  .meta({ id: 'IntegrationStatus' });

const MissingOrderOut = z
  .object({
    object: z.literal('missing_order'),
    order_id: z.string(),
    observed_at: z.iso.datetime().meta({ description: '`occurred_at` of the order.observed event.' }),
    amount: z.int().nullable().meta({ description: 'As observed, in minor units of `currency`.' }),
    currency: z.string().nullable(),
    observed_event_id: z.string(),
    request_id: z.string().meta({ description: 'The request that carried the order.observed event.' }),
  })
  .meta({ id: 'MissingOrder' });

const MissingOrderList = z
  .object({ object: z.literal('list'), data: z.array(MissingOrderOut), has_more: z.boolean() })
  .meta({ id: 'MissingOrderList' });

const MissingOrdersQuery = z.strictObject({
  limit: z.coerce
    .number({ error: 'must be an integer from 1 to 500' })
    .int({ error: 'must be an integer from 1 to 500' })
    .min(1, { error: 'must be an integer from 1 to 500' })
    .max(500, { error: 'must be an integer from 1 to 500' })
    .default(100),
});

/** A brand live for a day, browser script on, one order the server has not sent yet. */
const statusExample: z.input<typeof IntegrationStatusOut> = {
  object: 'integration_status',
  livemode: true,
  platform: 'shopify',
  clicks_24h: 412,
  orders_24h: 57,
  unattributed_24h: 31,
  missing_orders_24h: 1,
  last_event_at: '2026-11-22T09:41:12.000Z',
  last_error_code: null,
  consecutive_failures: 0,
  checklist: [
    { check: 'live_order_paid_24h', status: 'pass', hint: 'A live order.paid arrived in the last 24 hours.' },
    {
      check: 'click_ref_seen_24h',
      status: 'pass',
      hint: 'Some order carried click_ref in the last 24 hours.',
    },
    {
      check: 'refunds_seen_7d',
      status: 'fail',
      hint: 'No refund.created or order.cancelled in 7 days: send them when buyers return goods.',
    },
    {
      check: 'browser_script_seen_24h',
      status: 'pass',
      hint: 'lf.js sent page.viewed in the last 24 hours.',
    },
    {
      check: 'missing_orders_low_24h',
      status: 'pass',
      hint: "Missing orders are at most 1% of the day's orders.",
    },
    {
      check: 'no_consecutive_failures',
      status: 'pass',
      hint: 'No request has failed since the last accepted one.',
    },
  ],
  webhooks: { endpoints_enabled: 1, endpoints_failing: [], endpoints_disabled_by_failures: [] },
};

const secretKeyForIntegration = secretKeyRequired('The integration status can only be read');

const errors = [
  'invalid_api_key',
  'brand_not_active',
  'secret_key_required',
  'temporary_service_error',
] as const;

export function integrationRoutes({ reads }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/integration/status',
      operationId: 'getIntegrationStatus',
      summary: 'Integration health over the last 24 hours',
      description: "Counts for the key's mode, refreshed every minute by a worker (and on read when older).",
      tag: 'Integration',
      security: 'secret_key',
      refusePublishableKey: secretKeyForIntegration,
      responses: {
        200: { description: 'The summary.', schema: IntegrationStatusOut, example: statusExample },
      },
      errors: [...errors],
      async handle(req, res) {
        const caller = callerOf(req);
        const { s, checklist, webhooks } = await reads!.read(async (em, onReplica) => {
          const s = await integrationStatus(em, caller, { readOnly: onReplica });
          return {
            s,
            checklist: await integrationChecklist(em, caller, s),
            webhooks: await webhookHealth(em, caller),
          };
        });
        res.json({
          object: 'integration_status',
          livemode: caller.livemode,
          platform: caller.platform,
          clicks_24h: s.clicks_24h,
          orders_24h: s.orders_24h,
          unattributed_24h: s.unattributed_24h,
          missing_orders_24h: s.missing_orders_24h,
          last_event_at: s.last_event_at ? new Date(s.last_event_at).toISOString() : null,
          last_error_code: s.last_error_code,
          consecutive_failures: s.consecutive_failures,
          checklist,
          webhooks,
        } satisfies z.input<typeof IntegrationStatusOut>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/integration/missing_orders',
      operationId: 'listMissingOrders',
      summary: 'Orders a browser saw but the server never sent',
      description:
        'order.observed events with no order.paid after the gap delay, in the last 24 hours, oldest first: resend order.paid for each. An order that arrives leaves the list at once.',
      tag: 'Integration',
      security: 'secret_key',
      refusePublishableKey: secretKeyForIntegration,
      query: MissingOrdersQuery,
      responses: {
        200: {
          description: 'The missing orders.',
          schema: MissingOrderList,
          example: {
            object: 'list',
            has_more: false,
            data: [
              {
                object: 'missing_order',
                order_id: 'A-1002',
                observed_at: '2026-11-22T01:10:00.000Z',
                amount: 12900,
                currency: 'KRW',
                observed_event_id: 'evt_01m85a0k1d7q3v9x2c4h6j8k0m',
                request_id: 'req_01m85a0k1c4n7q2w9e3r5t8y0v',
              },
            ],
          },
        },
      },
      errors: [...errors],
      async handle(req, res, { query }) {
        const rows = await reads!.read((em) => listMissingOrders(em, callerOf(req), query.limit + 1));
        res.json({
          object: 'list',
          has_more: rows.length > query.limit,
          data: rows.slice(0, query.limit).map((m) => ({
            object: 'missing_order',
            order_id: m.order_id,
            observed_at: new Date(m.observed_at).toISOString(),
            amount: m.amount === null ? null : Number(m.amount),
            currency: m.currency,
            observed_event_id: m.observed_event_id,
            request_id: m.request_id,
          })),
        } satisfies z.input<typeof MissingOrderList>);
      },
    }),
  ];
}
