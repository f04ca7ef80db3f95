import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: a received event's data and attribution decision become `json` (the text as written)
 * instead of `jsonb`, and the index the explanation reads an order's events by becomes a hash of
 * the order id. For a coupon-code order.paid: the packed decision is about 100 bytes of text
 * where jsonb took 244, and the index about 31 bytes where the btree on (brand, mode, order id)
 * took 97. Nothing queries inside either column beyond `->>`, which json has too.
 *
 * The type change rewrites received_events under an exclusive lock (ingestion waits for it):
 * timed on 1,000,000 orders in docs/benchmarks.md. Rows written before keep their content;
 * their decisions stay objects, which the explanation reads as it always did.
 */
export class Migration20261125190000 extends Migration {
  override name = 'Migration20261125190000';

  override async up(): Promise<void> {
    this.addSql(`alter table "received_events"
      alter column "data" type json using "data"::json,
      alter column "attribution" type json using "attribution"::json;`);
    this.addSql(`drop index "received_events_order_index";`);
    this.addSql(`create index "received_events_order_index" on "received_events" using hash ("order_id")
      where type in ('order.paid', 'refund.created', 'order.cancelled', 'order.confirmed');`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "received_events_order_index";`);
    this.addSql(`create index "received_events_order_index" on "received_events" ("brand_id", "livemode", "order_id")
      where type in ('order.paid', 'refund.created', 'order.cancelled', 'order.confirmed');`);
    this.addSql(`alter table "received_events"
      alter column "data" type jsonb using "data"::jsonb,
      alter column "attribution" type jsonb using "attribution"::jsonb;`);
  }
}
