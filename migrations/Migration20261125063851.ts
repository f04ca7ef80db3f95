import { Migration } from '@mikro-orm/migrations';

type FactsModule = typeof import('../src/modules/reports/conversion-facts.js');
type GrainsModule = typeof import('../src/modules/reports/count-grains.js');

/** The report's own rules: compiled, the .js beside this file; from source (tests, npm run migrate), the .ts. */
async function load<T>(name: string): Promise<T> {
  const base = `../src/modules/reports/${name}`;
  return import(`${base}.js`).catch(() => import(`${base}.ts`));
}

/**
 * Issue 21, the conversion report's running totals: `conversion_tallies` (appended by each
 * group commit) and `conversion_counts` (folded every minute by report-rollup). Orders already
 * stored are counted here, a page at a time, as tallies the first fold takes in. The counts are
 * partitioned by (level, dim), 30 % of each page left free: a reading's rows lie together, and
 * a fold's update stays on its row's page (HOT), never scattering them. Orders that
 * processes of the previous version change while this release rolls out are not counted: roll
 * out with ingestion drained when the report must match to the won from the first minute.
 */
export class Migration20261125063851 extends Migration {
  override name = 'Migration20261125063851';

  override async up(): Promise<void> {
    const { tallyStoredOrders } = await load<FactsModule>('conversion-facts');
    const { countGrains } = await load<GrainsModule>('count-grains');
    await this.execute(
      `create table "conversion_counts" ("brand_id" varchar(255) not null, "livemode" boolean not null, "dim" smallint not null, "level" smallint not null, "key" varchar(400) collate "C" not null, "bucket_start" timestamptz not null, "orders" bigint not null, "attributed_orders" bigint not null, "amount" bigint not null, "commission" bigint not null, "refunded_amount" bigint not null, "reversed_commission" bigint not null, primary key ("brand_id", "livemode", "dim", "level", "key", "bucket_start")) partition by range ("level", "dim");`,
    );
    for (const [dim, level] of countGrains) {
      await this.execute(
        `create table "conversion_counts_${level}_${dim}" partition of "conversion_counts" for values from (${level}, ${dim}) to (${level}, ${dim + 1}) with (fillfactor = 70);`,
      );
    }
    await this.execute(
      `create index "conversion_counts_bucket_index" on "conversion_counts" ("brand_id", "livemode", "dim", "level", "bucket_start");`,
    );
    await this.execute(
      `create table if not exists "conversion_tallies" ("id" bigserial primary key, "brand_id" varchar(255) not null, "livemode" boolean not null, "bucket_start" timestamptz not null, "creator_id" varchar(255) not null, "sku" varchar(120) not null, "orders" int not null, "heads" int not null, "amount" bigint not null, "commission" bigint not null, "refunded_amount" bigint not null, "reversed_commission" bigint not null);`,
    );
    await this.execute(
      `create index if not exists "conversion_tallies_brand_index" on "conversion_tallies" ("brand_id", "livemode", "bucket_start");`,
    );
    await tallyStoredOrders((sql, params) => this.execute(sql, params));
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "conversion_tallies";`);
    await this.execute(`drop table if exists "conversion_counts";`);
  }
}
