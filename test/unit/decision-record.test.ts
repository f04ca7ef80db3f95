import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AttributionDecision } from '../../src/modules/attribution/decision.js';
import { readDecision, recordDecision } from '../../src/modules/attribution/decision-record.js';
import type { Candidate } from '../../src/modules/attribution/resolve.js';

const id = fc.option(fc.string({ maxLength: 30 }));
const int = fc.option(fc.integer({ min: 0, max: 2 ** 40 }));
const candidate: fc.Arbitrary<Candidate> = fc.oneof(
  fc.record({
    type: fc.constant('coupon_code' as const),
    code: fc.string(),
    found: fc.boolean(),
    creator_id: id,
    offer_id: id,
  }),
  fc
    .tuple(
      fc.record({
        type: fc.constant('click' as const),
        click_ref: fc.string(),
        last_touch_channel: id,
        channel_allows: fc.boolean(),
        found: fc.boolean(),
        creator_id: id,
        offer_id: id,
        clicked_at: id,
        window_days: int,
        age_seconds: int,
        within_window: fc.option(fc.boolean()),
      }),
      // A recorded click id, or a signed reference with what its verification found.
      fc.oneof(
        fc.constant({ signed: false, signature_valid: null, link_id: null }),
        fc.record({ signed: fc.constant(true), signature_valid: fc.option(fc.boolean()), link_id: id }),
      ),
    )
    .map(([click, reference]) => ({ ...click, ...reference })),
);
const decision: fc.Arbitrary<AttributionDecision> = fc.record({
  effect: fc.constantFrom('applied' as const, 'unchanged' as const),
  candidates: fc.array(candidate, { maxLength: 2 }),
  renewal: fc.option(
    fc.record({
      parent_order_id: fc.string(),
      parent_found: fc.boolean(),
      cycle_number: fc.integer({ min: 1, max: 1000 }),
      recurring_limit: fc.option(fc.integer({ min: 0, max: 1000 })),
      beyond_limit: fc.boolean(),
    }),
  ),
  sticky: fc.boolean(),
  result: fc.option(
    fc.record({
      via: fc.constantFrom('code' as const, 'click' as const, 'renewal' as const),
      creator_id: fc.string(),
      offer_id: id,
    }),
  ),
  previous_creator_id: id,
  self_purchase: fc.boolean(),
  commission: fc.option(
    fc.record({
      rate_bps: fc.integer({ min: 0, max: 10_000 }),
      rate_source: fc.constantFrom('offer' as const, 'brand_default' as const, 'inherited' as const),
      base_amount: fc.integer({ min: 0, max: 2 ** 40 }),
      amount: fc.integer({ min: 0, max: 2 ** 40 }),
      zeroed_by: fc.constantFrom('self_purchase' as const, 'renewal_limit' as const, null),
    }),
  ),
});

describe('a stored attribution decision', () => {
  it('reads back as the decision recorded, through JSON as PostgreSQL keeps it', () => {
    fc.assert(
      fc.property(decision, (d) => {
        const stored = JSON.parse(JSON.stringify(recordDecision(d)));
        expect(readDecision(stored)).toStrictEqual(JSON.parse(JSON.stringify(d)));
      }),
    );
  });

  it('is smaller than the decision as an object', () => {
    fc.assert(
      fc.property(decision, (d) => {
        expect(JSON.stringify(recordDecision(d)).length).toBeLessThan(JSON.stringify(d).length);
      }),
    );
  });

  it('is read as it is when stored before this form (an object)', () => {
    fc.assert(
      fc.property(decision, (d) => {
        expect(readDecision(d)).toBe(d);
      }),
    );
  });

  it("reads a click stored before signed references as a recorded click's, and stores a recorded click as before", () => {
    const before = ['k', 'clk_1', null, 1, 1, 'cr_1', 'off_1', '2026-11-20T00:00:00.000Z', 7, 3600, 1];
    const decision = readDecision([1, 'a', [before], null, 0, 0, null, 0, null]);
    expect(decision.candidates[0]).toMatchObject({
      type: 'click',
      click_ref: 'clk_1',
      signed: false,
      signature_valid: null,
      link_id: null,
    });
    expect((recordDecision(decision) as unknown[])[2]).toEqual([before]);
  });

  it('refuses a form it does not know, rather than misread it', () => {
    expect(() => readDecision([2, 'applied'])).toThrow(/unknown form: form 2/);
  });
});

describe('a coupon-code order.paid decision, the common case', () => {
  it('is stored in about 100 bytes of JSON text (500 as an object)', () => {
    const d: AttributionDecision = {
      effect: 'applied',
      candidates: [
        {
          type: 'coupon_code',
          code: 'MINA10',
          found: true,
          creator_id: 'cr_demo_mina',
          offer_id: 'off_demo_serum',
        },
      ],
      renewal: null,
      sticky: false,
      result: { via: 'code', creator_id: 'cr_demo_mina', offer_id: 'off_demo_serum' },
      previous_creator_id: null,
      self_purchase: false,
      commission: {
        rate_bps: 1000,
        rate_source: 'brand_default',
        base_amount: 12_900,
        amount: 1290,
        zeroed_by: null,
      },
    };
    const text = JSON.stringify(recordDecision(d));
    expect(text.length).toBeLessThanOrEqual(110);
    expect(JSON.stringify(d).length).toBeGreaterThan(400);
    expect(readDecision(JSON.parse(text))).toStrictEqual(d);
  });
});
