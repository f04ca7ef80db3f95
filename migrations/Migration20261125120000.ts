import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 22: the foreign keys every new order and ledger line checked, and the unique index on
 * generated conversion ids, go. Each check was a `FOR KEY SHARE` lock on a parent row that every
 * concurrent group commit shares (the brand, the creator, the offer: multixacts), a third of
 * PostgreSQL's CPU per event (docs/benchmarks.md, "Profile notes"). Their parents are never
 * deleted, and each child is written in the same statement as its parent or from a row the same
 * transaction read (docs/decisions.md, "Cost per event"). Constraints only: no row is rewritten.
 * What the foreign keys also did on delete stays: an order with a settlement line, and a line
 * with journal movements, cannot be deleted (the live journal is append-only; test-mode erasure
 * deletes movements, then lines, then orders). Triggers on delete cost nothing on insert.
 */
const dropped = [
  ['orders', 'orders_brand_id_foreign', 'foreign key ("brand_id") references "brands" ("id")'],
  [
    'orders',
    'orders_creator_id_foreign',
    'foreign key ("creator_id") references "creators" ("id") on delete set null',
  ],
  [
    'orders',
    'orders_offer_id_foreign',
    'foreign key ("offer_id") references "offers" ("id") on delete set null',
  ],
  [
    'ledger_entries',
    'ledger_entries_order_id_foreign',
    'foreign key ("order_id") references "orders" ("id") on delete cascade',
  ],
  [
    'ledger_movements',
    'ledger_movements_entry_id_foreign',
    'foreign key ("entry_id") references "ledger_entries" ("id") on delete cascade',
  ],
  ['orders', 'orders_conversion_id_unique', 'unique ("conversion_id")'],
] as const;

/** A before-delete trigger refusing to delete a `table` row that `child`.`column` still names (what the dropped foreign key's ON DELETE refused or cascaded). */
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

export class Migration20261125120000 extends Migration {
  override name = 'Migration20261125120000';

  override async up(): Promise<void> {
    for (const [table, name] of dropped) this.addSql(`alter table "${table}" drop constraint "${name}";`);
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

  override async down(): Promise<void> {
    this.addSql('drop trigger ledger_entries_keep_movements on "ledger_entries";');
    this.addSql('drop function ledger_entries_keep_movements();');
    this.addSql('drop trigger orders_keep_settlement_line on "orders";');
    this.addSql('drop function orders_keep_settlement_line();');
    for (const [table, name, definition] of [...dropped].reverse())
      this.addSql(`alter table "${table}" add constraint "${name}" ${definition};`);
  }
}
