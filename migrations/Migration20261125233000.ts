import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: an event's id is derived from its request's (`evt_` + the request id's body with the
 * event's index in its last two characters, src/shared/ids.ts), so a request's events are one
 * range of the primary key, and such an event stores no request id (its id gives it). The
 * request-id index keeps only events that store one (those written before, or whose request id
 * has another form): 31 bytes and one index entry less per event written from now on. Rebuilds
 * that index once (timed on 1,000,000 orders in docs/benchmarks.md); rewrites no row.
 */
export class Migration20261125233000 extends Migration {
  override name = 'Migration20261125233000';

  override async up(): Promise<void> {
    this.addSql(`alter table "received_events" alter column "request_id" drop not null;`);
    this.addSql(`drop index "received_events_request_id_index";`);
    this.addSql(
      `create index "received_events_request_id_index" on "received_events" ("request_id") where request_id is not null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(
      `update "received_events" set "request_id" = 'req_' || substr(id, 5, 24) || '00' where "request_id" is null;`,
    );
    this.addSql(`alter table "received_events" alter column "request_id" set not null;`);
    this.addSql(`drop index "received_events_request_id_index";`);
    this.addSql(`create index "received_events_request_id_index" on "received_events" ("request_id");`);
  }
}
