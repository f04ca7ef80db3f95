import { Migration } from '@mikro-orm/migrations';

/**
 * Staged rows' `order_id` compared bytewise (collation "C"): staging a row is mostly its descent
 * of the primary key, and a comparison's probes too, each step a comparison of order ids, which
 * under the database's default collation go through the locale's routines. Equality is the same
 * under either (both are deterministic), and nothing shows staged rows in order_id's order: only
 * the comparison's slices follow it, and the statements that meet other tables' order ids name
 * the collation they compare in (reconciliations/compare.ts).
 */
export class Migration20261208000000 extends Migration {
  override name = 'Migration20261208000000';

  override async up(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" alter column "order_id" type varchar(120) collate "C";`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" alter column "order_id" type varchar(120) collate "default";`,
    );
  }
}
