import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 39, webhook delivery in batches per endpoint: a pump claims one endpoint's due pending
 * deliveries in order, brand first, by `(brand_id, endpoint_id, next_attempt_at, id) where status
 * = 'pending'`; the queue reconciler and the disabling of a failing endpoint read it too. It
 * replaces the partial index on `created_at` (its one reader, the pending-deliveries metric,
 * counts every pending row either way), so ingestion keeps one partial index to maintain. A
 * pending delivery always has a next attempt now (default now(): rows written without one were
 * due at once and are due from their creation). On a large database build the index
 * concurrently first (README, "Upgrading").
 */
export class Migration20261128110000 extends Migration {
  override name = 'Migration20261128110000';

  override up(): void | Promise<void> {
    this.addSql(
      `update "webhook_deliveries" set "next_attempt_at" = "created_at" where "status" = 'pending' and "next_attempt_at" is null;`,
    );
    this.addSql(`alter table "webhook_deliveries" alter column "next_attempt_at" set default now();`);
    this.addSql(
      `create index if not exists "webhook_deliveries_due_index" on "webhook_deliveries" ("brand_id", "endpoint_id", "next_attempt_at", "id") where status = 'pending';`,
    );
    this.addSql(`drop index if exists "webhook_deliveries_pending_index";`);
  }

  override down(): void | Promise<void> {
    this.addSql(
      `create index if not exists "webhook_deliveries_pending_index" on "webhook_deliveries" ("created_at") where status = 'pending';`,
    );
    this.addSql(`drop index if exists "webhook_deliveries_due_index";`);
    this.addSql(`alter table "webhook_deliveries" alter column "next_attempt_at" drop default;`);
  }
}
