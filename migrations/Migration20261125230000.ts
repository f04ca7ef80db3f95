import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: a movement an event caused no longer stores its request id, which its event holds
 * (received_events.request_id), and the request-id index keeps only the movements no event
 * caused (a payout run's): 32 bytes and one index entry less per movement written from now on.
 * The admin trace reaches an event's movements through the event. Rows written before keep their
 * request id (it equals their event's), so `up` rewrites nothing; `down` fills the ids back from
 * the events.
 */
export class Migration20261125230000 extends Migration {
  override name = 'Migration20261125230000';

  override async up(): Promise<void> {
    this.addSql(`alter table "ledger_movements" alter column "request_id" drop not null;`);
    this.addSql(`alter table "ledger_movements" add constraint "ledger_movements_cause_check"
                   check (event_id is not null or request_id is not null);`);
    this.addSql(`drop index "ledger_movements_request_id_index";`);
    this.addSql(`create index "ledger_movements_request_id_index" on "ledger_movements" ("request_id")
                   where event_id is null;`);
  }

  override async down(): Promise<void> {
    // The journal is append-only by trigger; this one fill is the exception, in this transaction.
    this.addSql(`alter table "ledger_movements" disable trigger "ledger_movements_append_only";`);
    this.addSql(`update "ledger_movements" m set "request_id" = coalesce(
                   (select e.request_id from received_events e where e.id = m.event_id), 'req_unrecorded')
                 where m.request_id is null;`);
    this.addSql(`alter table "ledger_movements" enable trigger "ledger_movements_append_only";`);
    this.addSql(`drop index "ledger_movements_request_id_index";`);
    this.addSql(`create index "ledger_movements_request_id_index" on "ledger_movements" ("request_id");`);
    this.addSql(`alter table "ledger_movements" drop constraint "ledger_movements_cause_check";`);
    this.addSql(`alter table "ledger_movements" alter column "request_id" set not null;`);
  }
}
