import { z } from 'zod';
import { pageOf, pageQuery } from '../../shared/paging.js';
import { text } from '../../shared/text.js';
import { CreatorTierOut } from '../programs/creator-tiers.js';

const krw = (description: string) => z.int().meta({ description: `KRW (won). ${description}` });

export const CreatorBalance = z
  .object({
    currency: z.literal('KRW'),
    pending: krw(
      'Commission of attributed orders whose `confirm_at` has not passed yet (refunds so far deducted).',
    ),
    payable: krw(
      'Commission of confirmed orders, paid by the next payout run (live mode only; test orders are never paid out).',
    ),
    paid_out: krw('Net amount of every payout to this creator so far (commission less netted clawbacks).'),
    clawback_pending: krw(
      'Commission of orders refunded after their payout, not yet netted (zero or negative): the next payout deducts it.',
    ),
  })
  .meta({ id: 'CreatorBalance' });

export const CreatorOut = z
  .object({
    id: z.string(),
    object: z.literal('creator'),
    livemode: z
      .boolean()
      .meta({ description: 'The mode of the balance: the key’s. Creators themselves belong to both.' }),
    name: z.string(),
    codes: z
      .array(z.object({ code: z.string(), offer_id: z.string().nullable() }))
      .meta({ description: 'The creator’s discount codes, as the brand wrote them.' }),
    balance: CreatorBalance,
    created_at: z.iso.datetime(),
    tier: CreatorTierOut.nullable().meta({
      description:
        "The creator's commission tier in force now (commission programs with tiers); null: none. As JSON in CSV (its last column).",
    }),
  })
  .meta({ id: 'Creator' });
export type CreatorOutput = z.input<typeof CreatorOut>;

export const creatorExample: CreatorOutput = {
  id: 'cr_01kc6m0q1w2e3r4t5y6u7i8o9p',
  object: 'creator',
  livemode: true,
  name: 'Mina',
  codes: [{ code: 'MINA20', offer_id: 'of_01kc6m0q1w2e3r4t5y6u7i8o9q' }],
  balance: { currency: 'KRW', pending: 15600, payable: 7800, paid_out: 85800, clawback_pending: -7800 },
  created_at: '2026-11-02T01:00:00.000Z',
  tier: { key: 'gold', since: '2026-11-15T15:00:00.000Z', locked: false },
};

export const CreatorList = pageOf(CreatorOut, 'CreatorList');
export const CreatorListQuery = z.strictObject(pageQuery);
export const CreatorParams = z.strictObject({
  creator_id: text().min(1).max(255).meta({ description: 'The creator id (`cr_…`), as orders name it.' }),
});
