import { Migration } from '@mikro-orm/migrations';
import { movedBalances, tallyBalancesOnShard } from './Migration20261129000000.ts';

/**
 * Orders' balance tallies on Citus (Migration20261129000000 `tallyBalancesOnShard`), appended by a
 * statement prepared once per connection and balance_tallies shard instead of a dynamic one: the
 * dynamic `INSERT … SELECT` was parsed and planned, through Citus' planner, on every write of
 * orders. Its one argument, the moved sums, goes in as a single JSON literal (`EXECUTE` of a
 * prepared statement takes no parameters). A shard that moves away and back keeps its name and
 * PostgreSQL plans the statement again (the table it names was dropped and made anew); a split
 * gives new shard ids, so new statements. Plain PostgreSQL keeps its trigger (Migration20261126020000).
 * Also run by `npm run migrate` for a database distributed after this migration had run
 * (scripts/citus-catch-up.ts).
 */
const tallyBalancesPrepared = `create or replace function orders_tally_balances() returns trigger language plpgsql as $$
declare
  moved json;
  named text;
  shard bigint;
begin
${movedBalances}  if moved is null then return null; end if;
  shard := get_shard_id_for_distribution_column('balance_tallies', (moved->0)->>'brand_id');
  named := 'lf_balance_tallies_' || shard;
  if current_setting('lf.' || named, true) is distinct from 'prepared' then
    -- A transaction that rolled back forgot the setting below, not the statement.
    if not exists (select 1 from pg_prepared_statements p where p.name = named) then
      -- A shard has no default for the id: it is taken from the table's sequence, as the table's own would.
      execute format('prepare %I(json) as insert into %s (id, brand_id, livemode, creator_id, pending, payable, clawback_pending)
          select nextval(%L), x.* from json_to_recordset($1) as x(brand_id varchar, livemode boolean, creator_id varchar,
            pending bigint, payable bigint, clawback_pending bigint)',
        named, shard_name('balance_tallies'::regclass, shard), pg_get_serial_sequence('balance_tallies', 'id'));
    end if;
    perform set_config('lf.' || named, 'prepared', false);
  end if;
  execute format('execute %I(%L)', named, moved);
  return null;
end $$;`;

// biome-ignore lint/suspicious/noExplicitAny: raw rows.
export async function preparedBalanceTallies(execute: (sql: string) => Promise<any[]>): Promise<void> {
  await execute(tallyBalancesPrepared);
}

export class Migration20261207000200 extends Migration {
  override name = 'Migration20261207000200';

  /** Whether the tables are distributed (Citus found when Migration20261129000000 ran). */
  private async distributed(): Promise<boolean> {
    const citus = await this.execute(`select 1 from pg_extension where extname = 'citus'`);
    if (citus.length === 0) return false;
    const found = await this.execute(
      `select 1 from pg_dist_partition where logicalrelid = 'orders'::regclass`,
    );
    return found.length > 0;
  }

  override async up(): Promise<void> {
    // biome-ignore lint/suspicious/noExplicitAny: raw rows.
    if (await this.distributed()) await preparedBalanceTallies((sql) => this.execute(sql) as Promise<any[]>);
  }

  override async down(): Promise<void> {
    if (await this.distributed()) await this.execute(tallyBalancesOnShard);
  }
}
