import { Migration } from '@mikro-orm/migrations';

/**
 * The attribution explanation (GET /v1/orders/{order_id}/attribution) reads an order's
 * settlement events and the decision each order.paid recorded at the time: `attribution`
 * keeps that decision (candidates, winner, commission arithmetic), never recomputed later;
 * the partial index finds an order's events without touching browser signals.
 */
export class Migration20261123131500 extends Migration {
  override name = 'Migration20261123131500';

  override up(): void | Promise<void> {
    this.addSql(`alter table "received_events" add column "attribution" jsonb null;`);
    this.addSql(
      `create index "received_events_order_index" on "received_events" ("brand_id", "livemode", "order_id") where type in ('order.paid', 'refund.created', 'order.cancelled', 'order.confirmed');`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "received_events_order_index";`);
    this.addSql(`alter table "received_events" drop column "attribution";`);
  }
}
