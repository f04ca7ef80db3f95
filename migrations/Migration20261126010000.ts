import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: the journal is keyed by (order, id), so an order's movements are one range of its
 * primary key and the separate index by order goes (one B-tree entry fewer per movement, about 90
 * bytes of WAL). A movement an event caused gets an id derived from the event's
 * (shared/ids.ts `movementIdOf`) and stores no event id (31 bytes a movement), as events store no
 * request id. payout_clawbacks loses its foreign key to the movement, whose id alone is no longer
 * a key (live movements cannot be deleted anyway: the append-only trigger). The request-id index
 * keeps only a payout run's movements, as before. Rows written before keep their ids and event
 * ids: `up` rewrites no row, and builds the new primary key once under a lock that holds journal
 * writes (timed on 1,000,000 orders in docs/benchmarks.md); `down` fills derived movements' event
 * ids back from their ids.
 */
export class Migration20261126010000 extends Migration {
  override name = 'Migration20261126010000';

  override async up(): Promise<void> {
    this.addSql(`alter table "payout_clawbacks" drop constraint "payout_clawbacks_movement_id_foreign";`);
    this.addSql(`alter table "ledger_movements" drop constraint "ledger_movements_pkey";`);
    this.addSql(`alter table "ledger_movements" add constraint "ledger_movements_pkey" primary key ("order_id", "id")
                   with (fillfactor = 100);`);
    this.addSql(`drop index "ledger_movements_order_index";`);
    this.addSql(`drop index "ledger_movements_request_id_index";`);
    this.addSql(`create index "ledger_movements_request_id_index" on "ledger_movements" ("request_id")
                   where event_id is null and request_id is not null;`);
    this.addSql(`alter table "ledger_movements" drop constraint "ledger_movements_cause_check";`);
    this.addSql(`alter table "ledger_movements" add constraint "ledger_movements_cause_check"
                   check (event_id is not null or request_id is not null or length(id) = 30);`);
  }

  override async down(): Promise<void> {
    // The journal is append-only by trigger; this one fill is the exception, in this transaction.
    this.addSql(`alter table "ledger_movements" disable trigger "ledger_movements_append_only";`);
    this.addSql(`update "ledger_movements" set "event_id" = 'evt_' || substr(id, 4, 26)
                 where event_id is null and request_id is null;`);
    this.addSql(`alter table "ledger_movements" enable trigger "ledger_movements_append_only";`);
    this.addSql(`alter table "ledger_movements" drop constraint "ledger_movements_cause_check";`);
    this.addSql(`alter table "ledger_movements" add constraint "ledger_movements_cause_check"
                   check (event_id is not null or request_id is not null);`);
    this.addSql(`drop index "ledger_movements_request_id_index";`);
    this.addSql(`create index "ledger_movements_request_id_index" on "ledger_movements" ("request_id")
                   where event_id is null;`);
    this.addSql(
      `create index "ledger_movements_order_index" on "ledger_movements" ("order_id") with (fillfactor = 100);`,
    );
    this.addSql(`alter table "ledger_movements" drop constraint "ledger_movements_pkey";`);
    this.addSql(`alter table "ledger_movements" add constraint "ledger_movements_pkey" primary key ("id")
                   with (fillfactor = 100);`);
    this.addSql(`alter table "payout_clawbacks" add constraint "payout_clawbacks_movement_id_foreign"
                   foreign key ("movement_id") references "ledger_movements" ("id");`);
  }
}
