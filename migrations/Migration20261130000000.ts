import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 37, point 2: `brand_shards`, one row per brand, distributed by `brand_id` and co-located
 * with `creators` on Citus (a plain table elsewhere). On Citus the ingestion write reads its rows
 * from a parameter joined with the brand's `brand_shards` row (`from (select brand_id from
 * brand_shards where brand_id = $1) s cross join …`), so every insert and upsert has a
 * distributed table filtered by the brand as its source and Citus pushes the whole statement down
 * to the brand's shard: a router plan of one task, where an `INSERT … SELECT` from parameters
 * alone goes through the coordinator (a COPY, or an intermediate result for `ON CONFLICT`) and,
 * beside any routed write of the same transaction, is committed in two phases (docs/scale-out.md,
 * "Ingestion on Citus"). The ingestion engine adds a brand's row before the brand's first group
 * in each process (a brand made by hand still gets one); this backfills the brands there are.
 */
export class Migration20261130000000 extends Migration {
  override name = 'Migration20261130000000';

  override async up(): Promise<void> {
    const citus = (await this.execute(`select 1 from pg_extension where extname = 'citus'`)).length > 0;
    await this.execute(`create table "brand_shards" (
      "brand_id" varchar(255) not null primary key references "brands" ("id") on delete cascade
    );`);
    if (citus)
      await this.execute(`select create_distributed_table('brand_shards', 'brand_id', colocate_with => 'creators');`);
    await this.execute(`insert into "brand_shards" ("brand_id") select "id" from "brands";`);
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "brand_shards";`);
  }
}
