import { z } from 'zod';
import type { AttributionDecision } from '../attribution/decision.js';
import type { CommissionResult } from './commission.js';
import { describeCommission } from './describe-commission.js';

/** How an order's commission was decided (commission-programs.md, "Where it shows"). */
export const CommissionOut = z
  .object({
    version_id: z.string().nullable().meta({
      description:
        'The commission program version pinned to the order; null: none was in force (today’s rule).',
    }),
    tier: z.string().nullable().meta({
      description: 'The creator’s tier level key in force at `occurred_at` that the version has; null: none.',
    }),
    parts: z
      .array(
        z.object({
          line: z
            .int()
            .nullable()
            .meta({ description: '0-based index into the order’s `items`; null for the rest of the order.' }),
          sku: z.string().nullable(),
          amount: z.int().meta({ description: 'The part’s base in KRW (not its commission).' }),
          rate_bps: z.int(),
          source: z.enum(['product', 'not_eligible', 'tier', 'offer', 'program_default', 'brand_default']),
        }),
      )
      .meta({
        description:
          'What each line and the rest of the order was priced at, and which rule decided it; parts of 0 KRW may be left out.',
      }),
    before_caps: z
      .int()
      .meta({ description: 'Σ over rates of floor(Σ parts at the rate × rate / 10,000), in KRW.' }),
    capped_amount: z.int().meta({ description: 'What the caps cut: `before_caps` less the commission.' }),
    cap: z.enum(['per_order', 'per_creator_month']).nullable().meta({
      description: 'The monthly cap when it cut anything, else the per-order cap when it did; null: none.',
    }),
    description: z.string().meta({ description: 'The same, in words.' }),
  })
  .meta({ id: 'OrderCommission' });

export type CommissionOutput = z.output<typeof CommissionOut>;

type RecordedCommission = NonNullable<AttributionDecision['commission']>;

/** The result an order's recorded commission stands for: the program's as priced, else today's one rate. */
function resultOf(c: RecordedCommission, offerId: string | null): CommissionResult {
  const zeroed = c.zeroed_by !== null;
  const p = c.program;
  if (p)
    return {
      commission: c.amount,
      beforeCaps: p.before_caps,
      cappedAmount: p.capped_amount,
      cappedByOrder: p.capped_by_order,
      cap: p.cap,
      tier: p.tier,
      zeroed,
      parts: p.parts,
      rules: p.rules,
    };
  // An inherited rate is the offer's where the order has an offer with a rate of its own: the
  // recorded decision does not say which, so an order attributed through an offer names it.
  const source =
    c.rate_source === 'brand_default' || (c.rate_source === 'inherited' && offerId === null)
      ? 'brand_default'
      : 'offer';
  return {
    commission: c.amount,
    beforeCaps: zeroed ? 0 : c.amount,
    cappedAmount: 0,
    cappedByOrder: 0,
    cap: null,
    tier: null,
    zeroed,
    parts: [{ line: null, sku: null, amount: c.base_amount, rate_bps: c.rate_bps, source }],
    rules: [null],
  };
}

/** An order.paid decision's commission as the explanation and the dry run show it; null: unattributed. */
export function commissionOut(decision: AttributionDecision | null | undefined): CommissionOutput | null {
  const c = decision?.commission;
  if (!c) return null;
  const result = resultOf(c, decision.result?.offer_id ?? null);
  return {
    version_id: c.program?.version_id ?? null,
    tier: result.tier,
    // Parts of 0 KRW say nothing (a line of 0, or no rest), unless nothing else is left.
    parts: result.parts.some((p) => p.amount !== 0)
      ? result.parts.filter((p) => p.amount !== 0)
      : result.parts,
    before_caps: result.beforeCaps,
    capped_amount: result.cappedAmount,
    cap: result.cap,
    description: describeCommission(result, c.zeroed_by),
  };
}

/** A recorded commission in one sentence (describe-commission.ts), for the explanation's lines. */
export function commissionSentence(decision: AttributionDecision): string | null {
  return commissionOut(decision)?.description ?? null;
}
