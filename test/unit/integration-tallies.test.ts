import { describe, expect, it } from 'vitest';
import { integrationTallies, orderIntake } from '../../src/modules/integration/integration-tallies.js';

const scope = { brandId: 'brand_x', livemode: true };
/** A received order.paid as the write carries it: its received_at in milliseconds. */
const paid = (receivedAt: string) => ({
  brand_id: 'brand_x',
  livemode: true,
  type: 'order.paid',
  received_at: Date.parse(receivedAt),
});

describe('integration tallies of a group commit', () => {
  it('count new orders with the events that created them, in one tally per brand, mode and minute', () => {
    const at = '2026-11-26T01:02:03.456Z';
    const part = integrationTallies(
      [
        {
          scope,
          orders: [
            { isNew: true, creatorId: 'cr_x', clickRef: 'clk_1', countedAs: null },
            { isNew: true, creatorId: null, clickRef: null, countedAs: null },
          ],
        },
      ],
      [paid(at), paid(at)],
    );
    expect(part.rows).toEqual([
      expect.objectContaining({
        bucket: '2026-11-26T01:02:00.000Z',
        orders: 2,
        unattributed: 1,
        click_ref: 1,
        paid: 2,
        last_event_at: at,
      }),
    ]);
  });

  it('keep a tally per brand, mode and minute however their events interleave', () => {
    const at = (brand: string, livemode: boolean, received: string) => ({
      ...paid(received),
      brand_id: brand,
      livemode,
    });
    const part = integrationTallies(
      [],
      [
        at('brand_x', true, '2026-11-26T01:02:03.000Z'),
        at('brand_x', false, '2026-11-26T01:02:03.000Z'),
        at('brand_y', true, '2026-11-26T01:02:03.000Z'),
        at('brand_x', true, '2026-11-26T01:03:00.000Z'),
        at('brand_x', true, '2026-11-26T01:02:03.000Z'),
      ],
    );
    const tally = (brand_id: string, livemode: boolean, bucket: string, paid: number) =>
      expect.objectContaining({ brand_id, livemode, bucket, paid });
    expect(part.rows).toEqual([
      tally('brand_x', true, '2026-11-26T01:02:00.000Z', 2),
      tally('brand_x', false, '2026-11-26T01:02:00.000Z', 1),
      tally('brand_y', true, '2026-11-26T01:02:00.000Z', 1),
      tally('brand_x', true, '2026-11-26T01:03:00.000Z', 1),
    ]);
  });

  it('keep the latest received_at of a tally as its last event, whatever order the requests came in', () => {
    const part = integrationTallies(
      [],
      [paid('2026-11-26T01:02:03.456Z'), paid('2026-11-26T01:02:59.001Z'), paid('2026-11-26T01:02:10.000Z')],
    );
    expect(part.rows).toEqual([
      expect.objectContaining({
        bucket: '2026-11-26T01:02:00.000Z',
        paid: 3,
        last_event_at: '2026-11-26T01:02:59.001Z',
      }),
    ]);
  });

  it("move a stored order's flags in the minute it was created, and nothing for an unchanged one", () => {
    const created = new Date('2026-11-25T09:30:59.999Z');
    const was = orderIntake({ creatorId: null, clickRef: null }, created);
    const part = integrationTallies(
      [
        {
          scope,
          orders: [
            { isNew: false, creatorId: 'cr_x', clickRef: null, countedAs: was },
            { isNew: false, creatorId: null, clickRef: null, countedAs: was },
          ],
        },
      ],
      [],
    );
    expect(part.rows).toEqual([
      expect.objectContaining({
        bucket: '2026-11-25T09:30:00.000Z',
        orders: 0,
        unattributed: -1,
        click_ref: 0,
      }),
    ]);
  });
});
