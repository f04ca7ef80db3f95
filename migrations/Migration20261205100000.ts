import { Migration } from '@mikro-orm/migrations';

/**
 * `reconciliation_rows` keyed by its order_id only: the key on (brand, reconciliation, line) cost
 * a million-row upload's COPY a third to a half of its database CPU, beside live events, and
 * nothing reads the rows by line since the comparison takes them by order_id (compare.ts). The
 * unique key on order_id becomes the primary key under its own name, which a repeated order_id's
 * violation names (upload.ts). Staged rows live minutes: the table is empty but for uploads in
 * progress, so building the key is quick.
 */
export class Migration20261205100000 extends Migration {
  override name = 'Migration20261205100000';

  override async up(): Promise<void> {
    await this.execute(`alter table "reconciliation_rows" drop constraint "reconciliation_rows_pkey";`);
    await this.execute(
      `alter table "reconciliation_rows" drop constraint "reconciliation_rows_order_unique";`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_order_unique" primary key ("brand_id", "reconciliation_id", "order_id");`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" drop constraint "reconciliation_rows_order_unique";`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_pkey" primary key ("brand_id", "reconciliation_id", "line");`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_order_unique" unique ("brand_id", "reconciliation_id", "order_id");`,
    );
  }
}
