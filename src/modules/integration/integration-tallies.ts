import { brandTable, recordset, type WritePart } from '../../db/fast-path/index.js';
import { isoTime } from '../../shared/iso-time.js';

/** What an order counts for in integration status: whether it has no creator, whether it carries click_ref. */
const flagsOf = (order: { creatorId: string | null; clickRef: string | null }) => ({
  unattributed: order.creatorId === null ? 1 : 0,
  clickRef: order.clickRef ? 1 : 0,
});

/** What a stored order counts for, in the minute it was created. */
export type OrderIntake = ReturnType<typeof flagsOf> & { createdAt: Date };

export const orderIntake = (
  order: { creatorId: string | null; clickRef: string | null },
  createdAt: Date,
): OrderIntake => ({ ...flagsOf(order), createdAt });

interface ChangedOrder {
  isNew: boolean;
  creatorId: string | null;
  clickRef: string | null;
  /** As loaded; null for a new order. */
  countedAs: OrderIntake | null;
}

interface ReceivedRow {
  brand_id: string;
  livemode: boolean;
  type: string;
  /** Milliseconds since 1970. */
  received_at: number;
}

const measures = ['orders', 'unattributed', 'click_ref', 'paid', 'refunds', 'browser'] as const;
type Tally = Record<(typeof measures)[number], number> & {
  brand_id: string;
  livemode: boolean;
  /** The minute; null for the transaction's (a new order's when the group received no event). */
  bucket: string | null;
  last_event_at: string | null;
};

const eventMeasure: Record<string, (typeof measures)[number]> = {
  'order.paid': 'paid',
  'refund.created': 'refunds',
  'order.cancelled': 'refunds',
  'page.viewed': 'browser',
  'order.observed': 'browser',
};

const minuteOf = (at: Date | number) => {
  const ms = typeof at === 'number' ? at : at.getTime();
  return isoTime(ms - (ms % 60_000));
};

/** The tally insert, built once: every group commit writes it. Its id is taken from the
 * table's sequence by name: a Citus shard, which the brand's write names there, has no default
 * for it (db/fast-path/brand-shards.ts). */
const integrationTallyInsert = `insert into ${brandTable('integration_tallies')} (id, brand_id, livemode, bucket_start, orders, unattributed_orders, click_ref_orders,
                                           paid_events, refund_events, browser_events, last_event_at)
          select nextval('integration_tallies_id_seq'), x.brand_id, x.livemode, coalesce(x.bucket, date_trunc('minute', now())), x.orders, x.unattributed,
                 x.click_ref, x.paid, x.refunds, x.browser, x.last_event_at
            from ${recordset({
              brand_id: 'text',
              livemode: 'boolean',
              bucket: 'timestamptz',
              orders: 'int',
              unattributed: 'int',
              click_ref: 'int',
              paid: 'int',
              refunds: 'int',
              browser: 'int',
              last_event_at: 'timestamptz',
            })}`;

/**
 * A group commit's intake, summed per brand, mode and minute, appended as tallies: orders it
 * created, and for an order it changed, how its "unattributed" and "carries click_ref" moved
 * (counted in the minute the order was created, so a day's counts stay those of the day's
 * orders as they are now); and the events it received, with the latest one's time.
 */
export function integrationTallies(
  scopes: Iterable<{ scope: { brandId: string; livemode: boolean }; orders: Iterable<ChangedOrder> }>,
  received: readonly ReceivedRow[],
): WritePart {
  const tallies = new Map<string, Tally>();
  // A group's events nearly all share one brand, mode and minute: the last tally is tried first,
  // before a key is spelt and hashed (two per event, on the batch path).
  let last: Tally | undefined;
  const tally = (brandId: string, livemode: boolean, bucket: string | null) => {
    if (last && last.bucket === bucket && last.brand_id === brandId && last.livemode === livemode)
      return last;
    const key = `${brandId}\u0000${livemode}\u0000${bucket}`;
    let t = tallies.get(key);
    if (!t) {
      t = {
        brand_id: brandId,
        livemode,
        bucket,
        last_event_at: null,
        orders: 0,
        unattributed: 0,
        click_ref: 0,
        paid: 0,
        refunds: 0,
        browser: 0,
      };
      tallies.set(key, t);
    }
    last = t;
    return t;
  };
  // New orders count in the minute the group received its events (their created_at is the
  // transaction's now(), milliseconds apart), so they share the events' tally.
  const receivedMinute = received[0] ? minuteOf(received[0].received_at) : null;
  for (const { scope, orders } of scopes) {
    for (const o of orders) {
      const now = flagsOf(o);
      const was = o.countedAs;
      if (o.isNew || !was) {
        const t = tally(scope.brandId, scope.livemode, receivedMinute);
        t.orders += 1;
        t.unattributed += now.unattributed;
        t.click_ref += now.clickRef;
      } else if (now.unattributed !== was.unattributed || now.clickRef !== was.clickRef) {
        const t = tally(scope.brandId, scope.livemode, minuteOf(was.createdAt));
        t.unattributed += now.unattributed - was.unattributed;
        t.click_ref += now.clickRef - was.clickRef;
      }
    }
  }
  // A request's events share their received_at: its minute is worked out once.
  let at: number | undefined;
  let minute = '';
  let atText = '';
  for (const e of received) {
    if (e.received_at !== at) {
      at = e.received_at;
      minute = minuteOf(at);
      atText = isoTime(at);
    }
    const t = tally(e.brand_id, e.livemode, minute);
    const measure = eventMeasure[e.type];
    if (measure) t[measure] += 1;
    // ISO instants of one format compare as text.
    if (!t.last_event_at || atText > t.last_event_at) t.last_event_at = atText;
  }
  return {
    sql: integrationTallyInsert,
    rows: [...tallies.values()],
  };
}

/** Integration tallies into their minute's counts (folded with the report's: fold-tallies.ts). */
export const foldIntegrationTallies = `
    insert into integration_counts (brand_id, livemode, bucket_start, orders, unattributed_orders, click_ref_orders,
                                    paid_events, refund_events, browser_events, last_event_at)
    select brand_id, livemode, bucket_start, sum(orders), sum(unattributed_orders), sum(click_ref_orders),
           sum(paid_events), sum(refund_events), sum(browser_events), max(last_event_at)
      from moved group by 1, 2, 3 order by 1, 2, 3
    on conflict (brand_id, livemode, bucket_start) do update set
      orders = integration_counts.orders + excluded.orders,
      unattributed_orders = integration_counts.unattributed_orders + excluded.unattributed_orders,
      click_ref_orders = integration_counts.click_ref_orders + excluded.click_ref_orders,
      paid_events = integration_counts.paid_events + excluded.paid_events,
      refund_events = integration_counts.refund_events + excluded.refund_events,
      browser_events = integration_counts.browser_events + excluded.browser_events,
      last_event_at = greatest(integration_counts.last_event_at, excluded.last_event_at)`;

/**
 * A brand's intake in one mode since `since` (SQL for a timestamptz), minute by minute: folded
 * counts and the tallies not folded yet, read in one snapshot (a fold moves a tally in one
 * statement, so it is counted exactly once).
 */
export const intakeSince = (brand: string, livemode: string, since: string) => `(
  select c.bucket_start, c.orders, c.unattributed_orders, c.click_ref_orders, c.paid_events, c.refund_events,
         c.browser_events, c.last_event_at
    from integration_counts c where c.brand_id = ${brand} and c.livemode = ${livemode} and c.bucket_start >= ${since}
  union all
  select t.bucket_start, t.orders, t.unattributed_orders, t.click_ref_orders, t.paid_events, t.refund_events,
         t.browser_events, t.last_event_at
    from integration_tallies t where t.brand_id = ${brand} and t.livemode = ${livemode} and t.bucket_start >= ${since})`;

/** The first minute a 24-hour count covers (so "24 hours" is 24 hours to the minute). */
export const DAY_START = `date_trunc('minute', now() - interval '24 hours')`;
