// `npm run bench -- --preview`: the commission program preview over a brand's year of orders
// (commission-programs.md, "Preview"): BENCH_PREVIEW_ORDERS orders written straight into the
// bench database, a draft version with product rules and both caps, then the preview timed.
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { inTransaction } from '../../src/db/fast-path/index.js';
import { previewVersion } from '../../src/modules/programs/preview.js';
import { createVersion } from '../../src/modules/programs/programs.service.js';

export interface PreviewBenchResult {
  orders: number;
  creators: number;
  seedMs: number;
  /** Each timed preview, in order. */
  runsMs: number[];
  plan: string;
}

const DAY = 86_400_000;

/**
 * `n` live orders of `brandId` over the 365 days before now, spread over `creatorIds` (one in 20
 * unattributed), two lines each (a SERUM- and a GIFT- SKU), one in 10 in USD, one in 15 partly
 * refunded, one in 50 a self-purchase: what pricing reads varies as it would.
 */
export async function seedPreviewOrders(
  db: Pick<pg.Client, 'query'>,
  brandId: string,
  creatorIds: readonly string[],
  n: number,
): Promise<void> {
  await db.query(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, original_amount, original_currency,
            fx_rate, commission_amount, refunded_amount, refunded_original_amount, creator_id, attributed_via,
            commission_bps, flags, items, occurred_at)
     select 'ord_bench_preview_' || g, $1, true, 'BENCH-PREVIEW-' || g,
            case when c.id is null then 'unattributed' else 'pending' end,
            a.krw, a.minor, a.currency, a.fx, case when c.id is null or g % 50 = 0 then 0 else a.krw / 10 end,
            case when g % 15 = 0 then a.krw / 2 else 0 end, case when g % 15 = 0 then a.minor / 2 else 0 end,
            c.id, case when c.id is null then null else 'code' end, case when c.id is null then null else 1000 end,
            case when g % 50 = 0 and c.id is not null then array['self_purchase'] end,
            jsonb_build_array(jsonb_build_object('sku', 'SERUM-' || (g % 7), 'amount', a.minor / 2),
                              jsonb_build_object('sku', 'GIFT-' || (g % 3), 'amount', a.minor / 4)),
            now() - ($4::float8 * (g - 0.5) / $3) * interval '1 millisecond'
       from generate_series(1, $3::int) g
       cross join lateral (select case when g % 10 = 0 then 'USD' else 'KRW' end as currency,
                                  case when g % 10 = 0 then 1350.5 end as fx,
                                  case when g % 10 = 0 then 2000 + g % 9000 else 20000 + (g * 7919) % 180000 end as minor) m
       cross join lateral (select m.currency, m.fx, m.minor,
                                  case when m.fx is null then m.minor else round(m.minor * m.fx / 100)::bigint end as krw) a
       left join lateral (select ($2::text[])[1 + g % array_length($2::text[], 1)] as id where g % 20 <> 0) c on true`,
    [brandId, creatorIds, n, 365 * DAY],
  );
  await db.query('analyze orders');
}

/** Seeds, then times `runs` previews of the last 365 days (the first one included: nothing is cached between them). */
export async function previewBench(
  orm: MikroORM,
  db: Pick<pg.Client, 'query'>,
  brandId: string,
  creatorIds: readonly string[],
  n: number,
  runs = 3,
): Promise<PreviewBenchResult> {
  const seedStart = performance.now();
  await seedPreviewOrders(db, brandId, creatorIds, n);
  const seedMs = performance.now() - seedStart;
  const version = await inTransaction(orm, (sql) =>
    createVersion(sql, brandId, {
      rules: {
        default_rate_bps: 800,
        product_rates: [
          { match: { sku_prefix: 'SERUM-' }, rate_bps: 1500 },
          { match: { sku: 'SERUM-3' }, rate_bps: 2000 },
          { match: { sku_prefix: 'GIFT-' }, eligible: false },
        ],
        tiers: null,
        caps: { per_order: 20_000, per_creator_month: 2_000_000 },
      },
      time_zone: 'Asia/Seoul',
    }),
  );
  const to = new Date();
  const from = new Date(to.getTime() - 365 * DAY);
  const { rows } = await db.query<{ 'QUERY PLAN': string }>(
    `explain select id from orders where brand_id = $1 and livemode and occurred_at >= $2 and occurred_at < $3
      order by occurred_at, id limit 5000`,
    [brandId, from, to],
  );
  const runsMs: number[] = [];
  let orders = 0;
  let creators = 0;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const preview = await inTransaction(orm, (sql) =>
      previewVersion(sql, brandId, version.id, { from, to, livemode: true }),
    );
    runsMs.push(performance.now() - start);
    orders = preview.orders;
    creators = preview.creators.length;
  }
  return { orders, creators, seedMs, runsMs, plan: rows.map((r) => r['QUERY PLAN']).join('\n') };
}

export function renderPreview(r: PreviewBenchResult): string {
  const ms = (v: number) => `${Math.round(v)} ms`;
  return [
    `Commission preview: ${r.orders} orders of ${r.creators} creators over 365 days (seeded in ${ms(r.seedMs)}).`,
    `Runs: ${r.runsMs.map(ms).join(', ')}.`,
    'Plan of one batch:',
    ...r.plan.split('\n').map((line) => `    ${line}`),
    '',
  ].join('\n');
}
