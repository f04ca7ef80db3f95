import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: an order's settlement line becomes its `commission_balance` column. ledger_entries
 * held exactly one row per order, written with it (its creator always the order's), so every
 * new order paid for a second row, three index entries and a speculative-insert confirmation:
 * about 230 bytes stored and 400 bytes of WAL (docs/benchmarks.md, "Profile notes"). Journal
 * movements name their order instead of its line (`order_id`, orders.id). Nothing is lost: the
 * balance moves over as it is, and `up` refuses to run if any open line's creator is not its
 * order's. Rewrites ledger_movements once (timed on 1,000,000 orders in docs/benchmarks.md).
 */
/**
 * A before-delete trigger refusing to delete a `table` row that `child`.`column` still names, as
 * in Migration20261125120000 (a migration is self-contained: it keeps working as src changes).
 */
const keptWhileReferenced = (
  table: string,
  trigger: string,
  child: string,
  column: string,
  message: string,
) => `
  create function ${trigger}() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from ${child} where ${column} = old.id) then
        raise exception '${message}', old.id using errcode = '23503';
      end if;
      return old;
    end $$;
  create trigger ${trigger} before delete on "${table}" for each row execute function ${trigger}();`;

export class Migration20261125220000 extends Migration {
  override name = 'Migration20261125220000';

  override async up(): Promise<void> {
    this.addSql(`do $$ begin
      if exists (select 1 from ledger_entries le left join orders o on o.id = le.order_id
                  where o.id is null or (le.commission_balance <> 0 and le.creator_id is distinct from o.creator_id)) then
        raise exception 'a settlement line has no order, or an open line''s creator is not its order''s: '
          'inspect ledger_entries against orders before migrating (nothing was changed)';
      end if;
    end $$;`);
    // One rewrite of orders and one of the journal, each reading the lines by index (functions
    // that read a table are not inlined, so USING allows them): no dead row versions, indexes
    // rebuilt once. Row triggers do not fire on a table rewrite.
    this.addSql(`create function pg_temp.balance_of_order(o text) returns bigint language sql stable
                   as $$ select commission_balance from ledger_entries where order_id = o $$;`);
    this.addSql(`create function pg_temp.order_of_line(line text) returns varchar(255) language sql stable
                   as $$ select order_id from ledger_entries where id = line $$;`);
    this.addSql(`alter table "orders" add column "commission_balance" bigint;`);
    this.addSql(`alter table "orders" alter column "commission_balance" type bigint
                   using coalesce(pg_temp.balance_of_order("id"), 0);`);
    this.addSql(`alter table "orders" alter column "commission_balance" set default 0,
                   alter column "commission_balance" set not null;`);
    this.addSql(`alter table "ledger_movements" rename column "entry_id" to "order_id";`);
    this.addSql(
      `alter table "ledger_movements" alter column "order_id" type varchar(255) using pg_temp.order_of_line("order_id");`,
    );
    this.addSql(`alter index "ledger_movements_entry_index" rename to "ledger_movements_order_index";`);
    this.addSql(`drop trigger "orders_keep_settlement_line" on "orders";`);
    this.addSql(`drop function orders_keep_settlement_line();`);
    this.addSql(`drop table "ledger_entries";`);
    this.addSql(`drop function ledger_entries_keep_movements();`);
    this.addSql(
      keptWhileReferenced(
        'orders',
        'orders_keep_movements',
        'ledger_movements',
        'order_id',
        'order % has journal movements: the journal is append-only, so its order is kept (test-mode erasure deletes the movements first)',
      ),
    );
    this.addSql(`create index "orders_open_balance_index" on "orders" ("brand_id", "livemode", "creator_id")
                   where commission_balance <> 0;`);
  }

  override async down(): Promise<void> {
    // Every order gets its line back, named after it (line ids are internal: nothing outside
    // the journal ever showed them).
    this.addSql(`create table "ledger_entries" (
      "id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null,
      "order_id" varchar(255) not null, "creator_id" varchar(255) null,
      "commission_balance" bigint not null default 0,
      "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(),
      constraint "ledger_entries_pkey" primary key ("id"));`);
    this.addSql(`insert into "ledger_entries" (id, brand_id, livemode, order_id, creator_id, commission_balance, created_at, updated_at)
                 select 'le_' || id, brand_id, livemode, id, creator_id, commission_balance, created_at, updated_at from orders;`);
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_order_id_unique" unique ("order_id");`,
    );
    this.addSql(`create index "ledger_entries_open_index" on "ledger_entries" ("brand_id", "livemode", "creator_id")
                   where commission_balance <> 0;`);
    this.addSql(`drop trigger "orders_keep_movements" on "orders";`);
    this.addSql(`drop function orders_keep_movements();`);
    this.addSql(`drop index "orders_open_balance_index";`);
    this.addSql(`alter table "orders" drop column "commission_balance";`);
    this.addSql(`alter index "ledger_movements_order_index" rename to "ledger_movements_entry_index";`);
    this.addSql(
      `alter table "ledger_movements" alter column "order_id" type varchar(255) using 'le_' || "order_id";`,
    );
    this.addSql(`alter table "ledger_movements" rename column "order_id" to "entry_id";`);
    this.addSql(
      keptWhileReferenced(
        'orders',
        'orders_keep_settlement_line',
        'ledger_entries',
        'order_id',
        'order % has a settlement line: the journal is append-only, so its order is kept (test-mode erasure deletes the line first)',
      ),
    );
    this.addSql(
      keptWhileReferenced(
        'ledger_entries',
        'ledger_entries_keep_movements',
        'ledger_movements',
        'entry_id',
        'settlement line % has journal movements: the journal is append-only, so the line is kept (test-mode erasure deletes the movements first)',
      ),
    );
  }
}
