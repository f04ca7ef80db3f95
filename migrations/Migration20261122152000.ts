import { Migration } from '@mikro-orm/migrations';

/** Clawbacks netted into a payout: the primary key makes netting one clawback twice impossible. */
export class Migration20261122152000 extends Migration {
  override name = 'Migration20261122152000';

  override up(): void | Promise<void> {
    this.addSql(`create table "payout_clawbacks" (
      "movement_id" varchar(255) not null, "payout_id" varchar(255) not null,
      "created_at" timestamptz not null default now(), primary key ("movement_id"));`);
    this.addSql(
      `alter table "payout_clawbacks" add constraint "payout_clawbacks_movement_id_foreign" foreign key ("movement_id") references "ledger_movements" ("id");`,
    );
    this.addSql(
      `alter table "payout_clawbacks" add constraint "payout_clawbacks_payout_id_foreign" foreign key ("payout_id") references "payouts" ("id");`,
    );
    this.addSql(
      `create index "ledger_movements_clawback_index" on "ledger_movements" ("brand_id", "creator_id") where kind = 'clawback' and livemode;`,
    );
    this.addSql(
      `create index "orders_payable_index" on "orders" ("brand_id", "creator_id", "id") where status = 'confirmed' and livemode;`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "orders_payable_index";`);
    this.addSql(`drop index "ledger_movements_clawback_index";`);
    this.addSql(`drop table "payout_clawbacks";`);
  }
}
