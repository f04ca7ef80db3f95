import { Migration } from '@mikro-orm/migrations';

/**
 * Reconciliation: a fix that crosses api-v1's 90-day limit after the comparison is no longer
 * fixable when read (reconciliation.md, "The resend"). Each difference keeps `fix_at`, the
 * occurred_at of the order.paid its fix sends (null when the fix sends none dated), and each
 * reconciliation `fixable_until`, the first instant one of its fixable differences expires (null
 * when none will): reads count again only past it. Two nullable columns, no rewrite; on Citus the
 * ALTERs reach every shard.
 */
export class Migration20261203200000 extends Migration {
  override name = 'Migration20261203200000';

  override async up(): Promise<void> {
    await this.execute(`alter table "reconciliation_differences" add column "fix_at" timestamptz null;`);
    await this.execute(`alter table "reconciliations" add column "fixable_until" timestamptz null;`);
  }

  override async down(): Promise<void> {
    await this.execute(`alter table "reconciliation_differences" drop column if exists "fix_at";`);
    await this.execute(`alter table "reconciliations" drop column if exists "fixable_until";`);
  }
}
