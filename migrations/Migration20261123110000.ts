import { Migration } from '@mikro-orm/migrations';

const dropped = [
  ['ledger_entries', 'ledger_entries_brand_id_foreign', 'brand_id', 'brands', ''],
  ['ledger_entries', 'ledger_entries_creator_id_foreign', 'creator_id', 'creators', ' on delete set null'],
  ['ledger_movements', 'ledger_movements_brand_id_foreign', 'brand_id', 'brands', ''],
  [
    'ledger_movements',
    'ledger_movements_creator_id_foreign',
    'creator_id',
    'creators',
    ' on delete set null',
  ],
  ['received_events', 'received_events_brand_id_foreign', 'brand_id', 'brands', ''],
] as const;

/**
 * The journal's copies of brand and creator (ledger lines, movements, received events) are
 * written only by the ingestion engine, from the order row it holds locked (whose brand,
 * creator and offer keep their foreign keys) or from the authenticated key. Their own
 * foreign keys re-checked the same parents once per row: half of the per-row checks of a
 * group commit, for no extra guarantee. The structural keys (line → order, movement → line) stay.
 */
export class Migration20261123110000 extends Migration {
  override name = 'Migration20261123110000';

  override up(): void | Promise<void> {
    for (const [table, constraint] of dropped)
      this.addSql(`alter table "${table}" drop constraint "${constraint}";`);
  }

  override down(): void | Promise<void> {
    for (const [table, constraint, column, parent, action] of dropped) {
      this.addSql(
        `alter table "${table}" add constraint "${constraint}" foreign key ("${column}") references "${parent}" ("id")${action};`,
      );
    }
  }
}
