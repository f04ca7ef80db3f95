import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route } from '../../http/route.js';
import { AppError } from '../../shared/errors.js';
import { text } from '../../shared/text.js';
import { explainAttribution } from './attribution-explanation.js';

const nullableString = z.string().nullable();

const Candidate = z
  .discriminatedUnion('type', [
    z.object({
      type: z.literal('coupon_code'),
      code: z.string(),
      found: z.boolean(),
      creator_id: nullableString,
      offer_id: nullableString,
    }),
    z.object({
      type: z.literal('click'),
      click_ref: z.string(),
      last_touch_channel: nullableString,
      channel_allows: z.boolean().meta({ description: 'False when another channel had the last touch.' }),
      found: z.boolean(),
      creator_id: nullableString,
      offer_id: nullableString,
      clicked_at: z.iso.datetime().nullable(),
      window_days: z.int().nullable(),
      age_seconds: z.int().nullable().meta({ description: "The click's age at the order's occurred_at." }),
      within_window: z.boolean().nullable(),
    }),
  ])
  .meta({ id: 'AttributionCandidate' });

const Decision = z
  .object({
    effect: z.enum(['applied', 'unchanged']),
    candidates: z.array(Candidate).meta({ description: 'Coupon code, then click, in the order considered.' }),
    renewal: z
      .object({
        parent_order_id: z.string(),
        parent_found: z.boolean(),
        cycle_number: z.int(),
        recurring_limit: z.int().nullable(),
        beyond_limit: z.boolean(),
      })
      .nullable(),
    sticky: z.boolean().meta({ description: 'Nothing resolved and the order kept its attribution.' }),
    result: z
      .object({ via: z.enum(['code', 'click', 'renewal']), creator_id: z.string(), offer_id: nullableString })
      .nullable(),
    previous_creator_id: nullableString,
    self_purchase: z.boolean(),
    commission: z
      .object({
        rate_bps: z.int(),
        rate_source: z.enum(['offer', 'brand_default', 'inherited']),
        base_amount: z.int().meta({ description: 'The order amount in KRW.' }),
        amount: z.int(),
        zeroed_by: z.enum(['self_purchase', 'renewal_limit']).nullable(),
      })
      .nullable(),
  })
  .meta({
    id: 'AttributionDecision',
    description: 'Recorded when the order.paid was applied; never recomputed.',
  });

const Movement = z.object({ kind: z.string(), creator_id: nullableString, amount: z.int() });

export const AttributionExplanationOut = z
  .object({
    object: z.literal('attribution_explanation'),
    order_id: z.string(),
    livemode: z.boolean(),
    current: z.object({
      status: z.string(),
      attributed_via: nullableString,
      creator_id: nullableString,
      offer_id: nullableString,
      conversion_id: nullableString,
      commission_bps: z.int().nullable(),
      commission_amount: z.int(),
      refunded_commission_amount: z.int(),
      flags: z.array(z.string()),
    }),
    history: z.array(
      z.object({
        event_id: z.string(),
        type: z.string(),
        request_id: z.string(),
        occurred_at: z.iso.datetime(),
        received_at: z.iso.datetime(),
        decision: Decision.nullable().meta({ description: 'order.paid only.' }),
        refund: z
          .object({
            kind: z.enum(['refund', 'cancellation']),
            refund_id: nullableString,
            amount: z.int(),
            commission_reversed: z.int(),
          })
          .nullable(),
        movements: z.array(Movement).meta({ description: 'The journal movements this event wrote.' }),
        explanation: z.array(z.string()).meta({ description: 'The same, in sentences.' }),
      }),
    ),
    payouts: z.array(
      Movement.extend({ payout_id: z.string(), request_id: z.string(), at: z.iso.datetime() }),
    ),
  })
  .meta({ id: 'AttributionExplanation' });

const OrderParams = z.strictObject({
  order_id: text().min(1).max(120).meta({ description: 'The order_id the store sent.' }),
});

export function explanationRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/orders/{order_id}/attribution',
      operationId: 'explainOrderAttribution',
      summary: 'Why an order was (not) attributed',
      description:
        "The attribution decision of every order.paid (first and resends) as it was made: the candidates considered in order (coupon code found or not; click found or not, its age against the offer's window, last_touch_channel; renewal parent, cycle and limit), which won and why, sticky keeps, moves between creators, self-purchase, and the commission arithmetic; then every refund, cancellation, clawback and payout with its event and request_id. Built from what was recorded, never recomputed from today's configuration.",
      tag: 'Orders',
      security: 'secret_key',
      refusePublishableKey: () =>
        new AppError(
          'publishable_key_cannot_read_orders',
          'Orders can only be read with a secret (sk_) key.',
          {
            hint: 'Call this endpoint from your server with your sk_live_ or sk_test_ key.',
          },
        ),
      params: OrderParams,
      responses: { 200: { description: 'The explanation.', schema: AttributionExplanationOut } },
      errors: [
        'invalid_api_key',
        'brand_not_active',
        'publishable_key_cannot_read_orders',
        'order_not_found',
        'invalid_request_body',
      ],
      async handle(req, res, { params }) {
        const explanation = await explainAttribution(orm.em.fork(), callerOf(req), params.order_id);
        res.json(explanation satisfies z.input<typeof AttributionExplanationOut>);
      },
    }),
  ];
}
