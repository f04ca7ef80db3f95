import { describe, expect, it } from 'vitest';
import { programReads, rememberOutline } from '../../src/modules/ingestion/program-outline.js';
import type { ValidEvent } from '../../src/modules/ingestion/valid-event.js';
import type { BrandTerms } from '../../src/modules/keys/caller.js';

// What a group's load reads of a priced brand's program: each capping zone's months of the
// group's order.paid instants once, and the span of those instants for the tiers.
const brandId = '00000000-0000-4000-8000-00000000ab01';
const terms = { hasCommissionProgram: true } as BrandTerms;
const paid = (iso: string) => ({ type: 'order.paid', occurredAt: new Date(iso) }) as unknown as ValidEvent;
const refund = (iso: string) =>
  ({ type: 'order.refunded', occurredAt: new Date(iso) }) as unknown as ValidEvent;

describe('programReads', () => {
  it("reads each zone's month of every order.paid once, however the months alternate, and the tiers over their span", () => {
    rememberOutline(brandId, { zones: ['Asia/Seoul', 'UTC'], tiered: true });
    const events = [
      paid('2026-10-31T16:00:00Z'), // Seoul: November; UTC: October
      paid('2026-10-31T14:00:00Z'), // Seoul: October; UTC: October
      paid('2026-10-31T16:30:00Z'), // Seoul: November again, after another month
      refund('2026-12-15T00:00:00Z'), // not an order.paid: no month, no tier instant
      paid('2026-11-30T15:30:00Z'), // Seoul: December; UTC: November
    ];
    const reads = programReads([{ scope: { brandId, livemode: true }, terms, events }]);
    const months = reads.months.map((m) => `${m.time_zone} ${m.month_start} ${m.livemode}`).sort();
    expect(months).toEqual([
      'Asia/Seoul 2026-10-01 true',
      'Asia/Seoul 2026-11-01 true',
      'Asia/Seoul 2026-12-01 true',
      'UTC 2026-10-01 true',
      'UTC 2026-11-01 true',
    ]);
    expect(reads.tiers).toEqual([
      { brand_id: brandId, from_at: '2026-10-31T14:00:00.000Z', to_at: '2026-11-30T15:30:00.000Z' },
    ]);
  });

  it('reads nothing for a brand whose versions are not known yet, or that has no program', () => {
    const events = [paid('2026-10-31T16:00:00Z')];
    const unknown = { brandId: '00000000-0000-4000-8000-00000000ab02', livemode: true };
    expect(programReads([{ scope: unknown, terms, events }])).toEqual({ tiers: [], months: [] });
    const none = { hasCommissionProgram: false } as BrandTerms;
    expect(programReads([{ scope: { brandId, livemode: true }, terms: none, events }])).toEqual({
      tiers: [],
      months: [],
    });
  });
});
