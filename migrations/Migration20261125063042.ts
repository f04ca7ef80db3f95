import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 21: a payout's lines are its `payout` movements (GET /v1/payouts/{id}/lines), found by
 * payout_id (partial: ingestion's movements carry none); a creator's balance sums the open
 * settlement lines (non-zero balance: pending, payable, clawbacks not netted), found by brand,
 * mode and creator. On a large ledger, build both concurrently first (README, "Upgrading").
 */
export class Migration20261125063042 extends Migration {
  override name = 'Migration20261125063042';

  override up(): void | Promise<void> {
    this.addSql(
      `create index if not exists "ledger_movements_payout_index" on "ledger_movements" ("payout_id") where payout_id is not null;`,
    );
    this.addSql(
      `create index if not exists "ledger_entries_open_index" on "ledger_entries" ("brand_id", "livemode", "creator_id") where commission_balance <> 0;`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists "ledger_movements_payout_index";`);
    this.addSql(`drop index if exists "ledger_entries_open_index";`);
  }
}
