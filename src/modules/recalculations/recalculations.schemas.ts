import { z } from 'zod';
import { text } from '../../shared/text.js';

/** The longest period one recalculation covers: a year, a leap day included (as a preview). */
export const MAX_RECALCULATION_DAYS = 366;

export const RecalculationRequest = z
  .strictObject({
    from: z.iso
      .datetime({ offset: true })
      .meta({ description: 'Start of the period (included): orders with `occurred_at` at or after it.' }),
    to: z.iso.datetime({ offset: true }).meta({
      description: `End of the period (excluded): after \`from\`, at most ${MAX_RECALCULATION_DAYS} days later.`,
    }),
    livemode: z.boolean().default(true).meta({ description: 'Which mode’s orders: live (default) or test.' }),
  })
  .meta({ id: 'CommissionRecalculationRequest' });

export const RecalculationParams = z.strictObject({
  brand_id: text().max(40),
  recalculation_id: text().max(40),
});

const count = (description: string) => z.int().meta({ description });
const money = (description: string) => z.int().meta({ description });

export const RecalculationOut = z
  .object({
    object: z.literal('commission_recalculation'),
    id: z.string().meta({ description: '`crc_…`' }),
    version_id: z.string().meta({ description: 'The published version the orders are pinned to.' }),
    status: z.enum(['running', 'completed', 'failed']).meta({
      description:
        '`running` until every order of the period is done (progress also shows on its job in Bull Board), then `completed`; `failed` once its job gave up (POST again to recalculate what is left: orders done already stay as they are).',
    }),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    livemode: z.boolean(),
    orders_changed: count(
      'Orders recomputed whose commission changed: each has an `adjustment` movement in the journal under `request_id`.',
    ),
    orders_unchanged: count(
      'Orders recomputed whose commission stayed the same (their pin moved to the version all the same; unattributed orders count here).',
    ),
    skipped_paid_out: count('Orders left as they are because they are paid out.'),
    skipped_closed: count('Orders left as they are because they are refunded in full or cancelled.'),
    commission_before: money('Σ `commission_amount` of the recomputed orders before (KRW).'),
    commission_after: money('Σ `commission_amount` of the recomputed orders after (KRW).'),
    request_id: z.string().meta({
      description:
        'The request that started it: its journal movements and webhook events carry it (the admin trace finds them by it).',
    }),
    created_at: z.iso.datetime(),
    completed_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'CommissionRecalculation' });

export const recalculationExample = {
  object: 'commission_recalculation',
  id: 'crc_01kc6m0q1w2e3r4t5y6u7i8o9p',
  version_id: 'cpv_01kc6m0q1w2e3r4t5y6u7i8o9p',
  status: 'running',
  from: '2026-11-30T15:00:00.000Z',
  to: '2026-12-31T15:00:00.000Z',
  livemode: true,
  orders_changed: 0,
  orders_unchanged: 0,
  skipped_paid_out: 0,
  skipped_closed: 0,
  commission_before: 0,
  commission_after: 0,
  request_id: 'req_01kc6m0q1w2e3r4t5y6u7i8o00',
  created_at: '2026-12-02T01:00:00.000Z',
  completed_at: null,
} satisfies z.input<typeof RecalculationOut>;
