import { z } from 'zod';
import { MAX_PREVIEW_DAYS } from './preview.js';

export const PreviewRequest = z
  .strictObject({
    from: z.iso
      .datetime({ offset: true })
      .meta({ description: 'Start of the period (included): orders with `occurred_at` at or after it.' }),
    to: z.iso.datetime({ offset: true }).meta({
      description: `End of the period (excluded): after \`from\`, at most ${MAX_PREVIEW_DAYS} days later.`,
    }),
    livemode: z.boolean().default(true).meta({ description: 'Which mode’s orders: live (default) or test.' }),
  })
  .meta({ id: 'CommissionPreviewRequest' });

const money = (description: string) => z.int().meta({ description });

const figures = {
  current_commission: money('Σ of the orders’ `commission_amount` today (KRW).'),
  preview_commission: money('Σ of what the orders would earn under this version (KRW).'),
  difference: money('`preview_commission − current_commission` (KRW).'),
  capped_amount: money('KRW the version’s caps would not pay (before caps − after).'),
};

export const CreatorPreviewOut = z
  .object({
    creator_id: z.string(),
    orders: z.int().meta({ description: 'The creator’s orders in the period.' }),
    ...figures,
  })
  .meta({ id: 'CommissionPreviewCreator' });

export const PreviewOut = z
  .object({
    object: z.literal('commission_preview'),
    version_id: z.string(),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    livemode: z.boolean(),
    orders: z.int().meta({ description: 'Orders of the mode in the period, unattributed ones included.' }),
    totals: z.object(figures).meta({ description: 'Over the attributed orders of the period.' }),
    creators: z.array(CreatorPreviewOut).meta({ description: 'Per creator, by `creator_id`.' }),
  })
  .meta({ id: 'CommissionPreview' });

/** The CSV's columns: a creator's row as in `creators`. */
export const previewCsvColumns = Object.keys(CreatorPreviewOut.shape);

export const previewExample = {
  object: 'commission_preview',
  version_id: 'cpv_01kb3x8d7e9f0g1h2j3k4m5n6p',
  from: '2026-10-31T15:00:00.000Z',
  to: '2026-11-30T15:00:00.000Z',
  livemode: true,
  orders: 1284,
  totals: {
    current_commission: 5_120_400,
    preview_commission: 5_604_900,
    difference: 484_500,
    capped_amount: 120_000,
  },
  creators: [
    {
      creator_id: 'cr_01kb2w7c6d8e9f0g1h2j3k4m5n',
      orders: 412,
      current_commission: 1_830_000,
      preview_commission: 2_000_000,
      difference: 170_000,
      capped_amount: 120_000,
    },
  ],
} as const satisfies z.input<typeof PreviewOut>;
