import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundedTables, pruneBoundedTables } from '../../src/modules/retention/bounded-tables.js';
import { makeBrand } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Every table that grows with traffic and is not kept for good is pruned by the hourly
 * `outbox-prune` job: per table, rows past their keep time go and the rest stay, in batches.
 */
let ctx: TestContext;
let brandId: string;
beforeAll(async () => {
  ctx = await createTestApp();
  brandId = (await makeBrand(ctx.orm)).id;
});
afterAll(() => ctx.close());

const sql = (text: string, values: unknown[] = []) =>
  ctx.orm.em.fork().execute<Record<string, unknown>[]>(text, values);
const ids = async (table: string, column = 'id') =>
  (await sql(`select ${column} as id from ${table} order by ${column}`)).map((r) => r.id);
const prune = () => pruneBoundedTables(ctx.orm, 30);

describe('bounded tables', () => {
  it('outbox_messages: relayed over 7 days ago go, in batches of 1000; recent and unrelayed ones stay', async () => {
    await sql(
      `insert into outbox_messages (brand_id, id, job_name, data, available_at, relayed_at)
       select ?, 'obx_old_' || g, 'order-gap-detection', '{}', now(), now() - interval '8 days' from generate_series(1, 2500) g`,
      [brandId],
    );
    await sql(
      `insert into outbox_messages (brand_id, id, job_name, data, available_at, relayed_at) values
      (?, 'obx_recent', 'order-gap-detection', '{}', now(), now() - interval '6 days'),
      (?, 'obx_pending', 'order-gap-detection', '{}', now() - interval '30 days', null)`,
      [brandId, brandId],
    );
    expect((await prune()).outbox_messages).toBe(2500);
    expect(await ids('outbox_messages')).toEqual(['obx_pending', 'obx_recent']);
  });

  it('idempotency_records: past their 24 hours go', async () => {
    await sql(
      `insert into idempotency_records (brand_id, livemode, key, request_hash, response_status, response_body, created_at) values
        (?, true, 'old', 'h', 200, '{}', now() - interval '25 hours'),
        (?, true, 'fresh', 'h', 200, '{}', now() - interval '23 hours')`,
      [brandId, brandId],
    );
    expect((await prune()).idempotency_records).toBe(1);
    expect(await ids('idempotency_records', 'key')).toEqual(['fresh']);
  });

  it('integration_counts: older than the 8 days integration status may read go', async () => {
    const row = (minutesAgo: number) =>
      sql(
        `insert into integration_counts (brand_id, livemode, bucket_start, orders, unattributed_orders, click_ref_orders,
                                         paid_events, refund_events, browser_events)
         values (?, true, date_trunc('minute', now()) - make_interval(mins => ?), 1, 0, 0, 1, 0, 0)`,
        [brandId, minutesAgo],
      );
    await row(8 * 24 * 60 + 1);
    await row(8 * 24 * 60 - 1);
    expect((await prune()).integration_counts).toBe(1);
    expect(
      await sql(
        `select count(*)::int as n, bool_and(bucket_start > now() - interval '8 days') as recent from integration_counts`,
      ),
    ).toEqual([{ n: 1, recent: true }]);
  });

  it('ingestion_failures: older than the 7 days integration status may read go', async () => {
    await sql(
      `insert into ingestion_failures (id, brand_id, livemode, code, request_id, failed_at) values
        ('if_old', ?, true, 'invalid_request_body', 'req_1', now() - interval '8 days'),
        ('if_new', ?, true, 'invalid_request_body', 'req_2', now() - interval '1 day')`,
      [brandId, brandId],
    );
    expect((await prune()).ingestion_failures).toBe(1);
    expect(await ids('ingestion_failures')).toEqual(['if_new']);
  });

  it('webhook_events and webhook_deliveries: past WEBHOOK_EVENT_RETENTION_DAYS go, deliveries first; a pending one keeps its event', async () => {
    const event = (id: string, days: number) =>
      sql(
        `insert into webhook_events (id, brand_id, livemode, type, api_version, request_id, data, created_at)
         values (?, ?, true, 'conversion.created', 'v1', 'req', '{}', now() - make_interval(days => ?))`,
        [id, brandId, days],
      );
    const delivery = (id: string, eventId: string, days: number, status: string) =>
      sql(
        `insert into webhook_deliveries (id, brand_id, livemode, event_id, endpoint_id, request_id, status, created_at)
         values (?, ?, true, ?, 'we_gone', 'req', ?, now() - make_interval(days => ?))`,
        [id, brandId, eventId, status, days],
      );
    await event('evt_old', 31);
    await delivery('whd_old_ok', 'evt_old', 31, 'succeeded');
    await delivery('whd_old_failed', 'evt_old', 31, 'failed');
    await event('evt_stuck', 31);
    await delivery('whd_stuck', 'evt_stuck', 31, 'pending');
    await event('evt_new', 29);
    await delivery('whd_new', 'evt_new', 29, 'succeeded');
    const pruned = await prune();
    expect(pruned).toMatchObject({ webhook_deliveries: 2, webhook_events: 1 });
    expect(await ids('webhook_events')).toEqual(['evt_new', 'evt_stuck']);
    expect(await ids('webhook_deliveries')).toEqual(['whd_new', 'whd_stuck']);
  });

  it('clicks: older than 180 days go (no order they could attribute can still arrive), per brand', async () => {
    const other = (await makeBrand(ctx.orm)).id;
    for (const brand of [brandId, other]) {
      const { creator, offer } = (
        await sql(
          `with c as (insert into creators (id, brand_id, name) values ('cr_' || md5(random()::text), ?, 'Mina') returning id),
                o as (insert into offers (id, brand_id, name, landing_url, commission_bps)
                      values ('of_' || md5(random()::text), ?, 'Serum', 'https://shop.example.com/', 1000) returning id)
           select c.id as creator, o.id as offer from c, o`,
          [brand, brand],
        )
      )[0] as { creator: string; offer: string };
      await sql(
        `insert into clicks (id, brand_id, creator_id, offer_id, clicked_at) values
          (?, ?, ?, ?, now() - interval '181 days'), (?, ?, ?, ?, now() - interval '179 days')`,
        [`clk_old_${brand}`, brand, creator, offer, `clk_new_${brand}`, brand, creator, offer],
      );
    }
    expect((await prune()).clicks).toBe(2);
    expect(await ids('clicks')).toEqual([`clk_new_${brandId}`, `clk_new_${other}`].sort());
  });

  it('reconciliations: past RECONCILIATION_RETENTION_DAYS go with their staged rows and differences; staged rows only while processing', async () => {
    for (const [id, days, status] of [
      ['recon_old', 31, 'processing'],
      ['recon_new', 29, 'processing'],
      // A row a finished comparison left staged (none should): it is compared by nothing.
      ['recon_done', 1, 'completed'],
    ] as const) {
      await sql(
        `insert into reconciliations (brand_id, id, livemode, period_from, period_to, request_id, created_at, status)
         values (?, ?, true, now() - interval '40 days', now() - interval '39 days', 'req_x', now() - make_interval(days => ?), ?)`,
        [brandId, id, days, status],
      );
      await sql(
        `insert into reconciliation_rows (brand_id, reconciliation_id, line, order_id, status, amount, currency, refunded_amount)
         values (?, ?, 2, 'A-1', 'paid', 1, 'KRW', 0)`,
        [brandId, id],
      );
      await sql(
        `insert into reconciliation_differences (brand_id, reconciliation_id, seq, kind, order_id, fixable, amount_at_stake, commission_at_stake)
         values (?, ?, 1, 'missing_here', 'A-1', true, 1, 0)`,
        [brandId, id],
      );
    }
    expect(await prune()).toMatchObject({ reconciliations: 1, reconciliation_rows: 2 });
    expect(await ids('reconciliations')).toEqual(['recon_done', 'recon_new']);
    expect(await ids('reconciliation_rows', 'reconciliation_id')).toEqual(['recon_new']);
    expect(await ids('reconciliation_differences', 'reconciliation_id')).toEqual(['recon_done', 'recon_new']);
    expect(await pruneBoundedTables(ctx.orm, 30, 28)).toMatchObject({
      reconciliations: 1,
      reconciliation_rows: 1,
    });
    expect(await ids('reconciliation_rows', 'reconciliation_id')).toEqual([]);
  });

  // received_events (browser signals past 30 days; order events kept): browser-signal-counts.test.ts.

  it('a second run finds nothing left', async () => {
    expect(Object.values(await prune()).every((n) => n === 0)).toBe(true);
  });

  it('every table is bounded, kept for good, or one row per brand (a new table must say which)', async () => {
    const keptForGood = [
      // The books: what was paid, refunded, attributed and settled.
      'orders',
      'refunds',
      'ledger_movements',
      'payouts',
      'payout_clawbacks',
      'payout_runs',
      // Configuration, a handful of rows per brand.
      'brands',
      'api_keys',
      'offers',
      'creators',
      'coupon_codes',
      'tracking_links',
      'link_slugs',
      'webhook_endpoints',
      'integration_status',
      'requeued_work',
      // Commission program versions (immutable once published, pinned by orders) and each
      // creator's tier history (what priced an order at its occurred_at).
      'commission_program_versions',
      'creator_tiers',
      // The tier job's runs: a row per tiered brand and day (and per ops run).
      'creator_tier_runs',
      // One row per creator, month and mode under a monthly cap.
      'creator_month_commissions',
      // Recalculations ops ran: a row each, what changed the journal's adjustments under its request id.
      'commission_recalculations',
      // The pricing each recalculation gave an order it changed: the books' explanation, as
      // received order.paid events keep theirs (test mode's erased with its orders).
      'commission_recalculated_orders',
      'mikro_orm_migrations',
    ];
    // Bounded elsewhere: missing_orders cleared after 30 days by the gap sweep; tallies folded
    // every minute (browser-signal-counts.test.ts); counts are one row per brand, mode, quarter
    // hour and type, whatever the traffic.
    const elsewhere = [
      'missing_orders',
      'browser_signal_tallies',
      'browser_signal_counts',
      // Folded every minute (reports.test.ts); counts: a row per brand, mode, dimension key and
      // bucket, kept with the orders they sum (test mode's withdrawn with its orders).
      'conversion_tallies',
      'conversion_counts',
      // Tallies whose coarse grains a backlog's fold took first; folded with the rest (report-backlog.test.ts).
      'conversion_fine_tallies',
      // Folded every minute with the report's (integration.test.ts, settlement-properties.test.ts);
      // balances are a row per creator and mode.
      'integration_tallies',
      'balance_tallies',
      'creator_balances',
      // Deleted with their reconciliation (a foreign key on delete cascade).
      'reconciliation_differences',
    ];
    const tables =
      // A partition is bounded as its table is (conversion_counts' are per level and dimension).
      (
        await sql(
          `select c.relname as id from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`,
        )
      ).map((r) => r.id);
    expect(
      tables.filter(
        (t) => ![...keptForGood, ...elsewhere, ...Object.keys(boundedTables)].includes(t as string),
      ),
    ).toEqual([]);
  });
});
