import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route } from '../../http/route.js';
import { cannotReadOrders, OrderParams } from '../orders/orders.routes.js';
import { CommissionOut } from '../programs/commission-out.js';
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
      signed: z.boolean().meta({
        description:
          'A signed reference (`sclk_…`): the redirect recorded no click because the shopper’s address was past its click limit (a throttled address).',
      }),
      signature_valid: z
        .boolean()
        .nullable()
        .meta({ description: 'For a signed reference: whether this service signed it. Null otherwise.' }),
      link_id: nullableString.meta({ description: 'The tracking link a signed reference names.' }),
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
    commission: CommissionOut.nullable().meta({
      description:
        'How the order’s commission was decided by its last pricing (an applied order.paid, or a commission recalculation after it): the pinned commission program version, the tier, each part’s rate and the rule that set it, the caps. Null while the order is unattributed.',
    }),
    history: z.array(
      z.object({
        event_id: nullableString.meta({
          description: 'The event; null for a commission recalculation, which no event of the brand caused.',
        }),
        recalculation_id: nullableString.meta({
          description:
            'A commission recalculation that pinned the order to its version and priced it again (type `commission.recalculated`); else null.',
        }),
        type: z.string().meta({
          description:
            'The event type (order.paid, refund.created, order.cancelled, order.confirmed), or `commission.recalculated`.',
        }),
        request_id: z
          .string()
          .meta({ description: 'The request that carried the event, or the recalculation’s.' }),
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

const example = {
  object: 'attribution_explanation',
  order_id: 'A-1001',
  livemode: true,
  current: {
    status: 'pending',
    attributed_via: 'click',
    creator_id: 'cr_01mina',
    offer_id: 'of_01serum',
    conversion_id: 'conv_01abc',
    commission_bps: 2000,
    commission_amount: 7800,
    refunded_commission_amount: 2000,
    flags: [],
  },
  commission: {
    version_id: null,
    tier: null,
    parts: [{ line: null, sku: null, amount: 39_000, rate_bps: 2000, source: 'offer' }],
    before_caps: 7800,
    capped_amount: 0,
    cap: null,
    description: 'Commission 7,800 KRW: 20% (offer) on 39,000 KRW.',
  },
  history: [
    {
      event_id: 'evt_01paid',
      recalculation_id: null,
      type: 'order.paid',
      request_id: 'req_01paid',
      occurred_at: '2026-11-20T03:00:00.000Z',
      received_at: '2026-11-20T03:00:01.000Z',
      decision: {
        effect: 'applied',
        candidates: [
          { type: 'coupon_code', code: 'SPRING', found: false, creator_id: null, offer_id: null },
          {
            type: 'click',
            click_ref: 'lfc_01xyz',
            last_touch_channel: null,
            channel_allows: true,
            found: true,
            creator_id: 'cr_01mina',
            offer_id: 'of_01serum',
            clicked_at: '2026-11-18T09:00:00.000Z',
            window_days: 7,
            age_seconds: 151_200,
            within_window: true,
            signed: false,
            signature_valid: null,
            link_id: null,
          },
        ],
        renewal: null,
        sticky: false,
        result: { via: 'click', creator_id: 'cr_01mina', offer_id: 'of_01serum' },
        previous_creator_id: null,
        self_purchase: false,
        commission: {
          rate_bps: 2000,
          rate_source: 'offer',
          base_amount: 39_000,
          amount: 7800,
          zeroed_by: null,
        },
      },
      refund: null,
      movements: [{ kind: 'accrual', creator_id: 'cr_01mina', amount: 7800 }],
      explanation: [
        "Coupon code SPRING is not one of the brand's codes.",
        'Click lfc_01xyz (creator cr_01mina) happened 1.8 days before the order, inside its 7-day window.',
        'Attributed by click to creator cr_01mina.',
        "Commission 7,800 KRW = 20.00% (the offer's rate) of 39,000 KRW, rounded down to the won.",
      ],
    },
    {
      event_id: 'evt_01refund',
      recalculation_id: null,
      type: 'refund.created',
      request_id: 'req_01refund',
      occurred_at: '2026-11-21T05:00:00.000Z',
      received_at: '2026-11-21T05:00:00.500Z',
      decision: null,
      refund: { kind: 'refund', refund_id: 'r1', amount: 10_000, commission_reversed: 2000 },
      movements: [{ kind: 'reversal', creator_id: 'cr_01mina', amount: -2000 }],
      explanation: ['Refund r1 of 10,000 KRW reversed 2,000 KRW commission.'],
    },
  ],
  payouts: [],
} satisfies z.input<typeof AttributionExplanationOut>;

export function explanationRoutes({ reads }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/orders/{order_id}/attribution',
      operationId: 'explainOrderAttribution',
      summary: 'Why an order was (not) attributed',
      description:
        "The attribution decision of every order.paid (first and resends) as it was made: the candidates considered in order (coupon code found or not; click found or not, its age against the offer's window, last_touch_channel; renewal parent, cycle and limit), which won and why, sticky keeps, moves between creators, self-purchase, and the commission arithmetic; then every refund, cancellation, clawback and payout with its event and request_id, and every commission recalculation that priced the order again, with its adjustment and request_id. Built from what was recorded, never recomputed from today's configuration.",
      tag: 'Orders',
      security: 'secret_key',
      refusePublishableKey: cannotReadOrders,
      params: OrderParams,
      responses: { 200: { description: 'The explanation.', schema: AttributionExplanationOut, example } },
      errors: [
        'invalid_api_key',
        'brand_not_active',
        'publishable_key_cannot_read_orders',
        'order_not_found',
        'invalid_request_body',
      ],
      async handle(req, res, { params }) {
        const explanation = await reads!.read((em) => explainAttribution(em, callerOf(req), params.order_id));
        res.json(explanation satisfies z.input<typeof AttributionExplanationOut>);
      },
    }),
  ];
}
