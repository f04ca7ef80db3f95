import { z } from 'zod';
import { pageOf, pageQuery } from '../../shared/paging.js';
import { text } from '../../shared/text.js';
import { PayoutObject } from '../webhooks/event-types.js';

export const PayoutOut = PayoutObject.extend({
  created_at: z.iso.datetime().meta({
    description: 'When the payout was made final (with its payout.created); its totals never change after.',
  }),
}).meta({ id: 'Payout' });
export type PayoutOutput = z.input<typeof PayoutOut>;

export const payoutExample: PayoutOutput = {
  id: 'po_01kc7a2b3c4d5e6f7g8h9j0k1m',
  object: 'payout',
  livemode: true,
  creator_id: 'cr_01kc6m0q1w2e3r4t5y6u7i8o9p',
  run_key: '2026-12',
  order_count: 12,
  commission_amount: 93600,
  clawback_amount: -7800,
  net_amount: 85800,
  currency: 'KRW',
  created_at: '2026-12-09T15:00:04.000Z',
};

export const PayoutLineOut = z
  .object({
    id: z.string().meta({ description: 'The ledger movement that settled the line (`mv_…`).' }),
    object: z.literal('payout_line'),
    kind: z.enum(['order', 'clawback']).meta({
      description:
        '`order`: a confirmed order paid by this payout; `clawback`: commission of an order refunded after an earlier payout, netted here.',
    }),
    order_id: z.string(),
    conversion_id: z.string().nullable(),
    amount: z.int().meta({
      description:
        'KRW: positive for an order (its commission less refunds before payout), negative for a clawback. The lines sum to `net_amount`.',
    }),
    currency: z.literal('KRW'),
  })
  .meta({ id: 'PayoutLine' });
export type PayoutLineOutput = z.input<typeof PayoutLineOut>;

export const PayoutList = pageOf(PayoutOut, 'PayoutList');
export const PayoutLineList = pageOf(PayoutLineOut, 'PayoutLineList');

export const PayoutListQuery = z.strictObject({
  ...pageQuery,
  creator_id: text().min(1).max(255).optional().meta({ description: 'Only payouts of this creator.' }),
  run_key: z
    .string()
    .regex(/^\d{4}-\d{2}$/, { error: 'must be a payout run, YYYY-MM (e.g. 2026-12)' })
    .optional()
    .meta({ description: 'Only payouts of this run (`YYYY-MM`, the month in Asia/Seoul).' }),
});

export const PayoutLinesQuery = z.strictObject(pageQuery);

export const PayoutParams = z.strictObject({
  payout_id: text()
    .min(1)
    .max(40)
    .meta({ description: 'The payout id (`po_…`), as `payout.created` names it.' }),
});
