import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 36: a payout is final once announced. `finalized_at` marks it (null while a run is still
 * paying it in chunks), and the key that made every pass of a run add to one payout per
 * (brand, creator, run) keeps only open payouts unique: a later pass of the run key pays what
 * became due since into a new payout. Payouts already stored: final when their run finished
 * (`payout_runs`) or their payout.created was recorded, dated from their creation; the rest were
 * being paid by a run that did not finish, and the next pass of their run key finishes them.
 * `payout_runs`' counters are counted again from the payouts (reruns had added to them); down
 * leaves them so.
 */
export class Migration20261127000000 extends Migration {
  override name = 'Migration20261127000000';

  override async up(): Promise<void> {
    this.addSql(`alter table "payouts" add column "finalized_at" timestamptz null;`);
    this.addSql(`update "payouts" p set "finalized_at" = p."created_at"
                  where exists (select 1 from "payout_runs" r where r."run_key" = p."run_key")
                     or exists (select 1 from "webhook_events" e where e."dedup_key" = 'payout.created:' || p."id");`);
    this.addSql(`alter table "payouts" drop constraint "payouts_run_creator_unique";`);
    this.addSql(`create unique index "payouts_open_unique" on "payouts" ("brand_id", "creator_id", "run_key")
                  where finalized_at is null;`);
    // Runs' counters as the run now counts them (payout-run: creators paid, lines paid), in place
    // of the sums of every pass, which reruns doubled.
    this.addSql(`update "payout_runs" r set
                   "payees" = (select count(distinct (p.brand_id, p.creator_id)) from payouts p where p.run_key = r.run_key),
                   "items" = (select count(*) from payouts p join ledger_movements m on m.payout_id = p.id and m.kind = 'payout'
                               where p.run_key = r.run_key);`);
  }

  override async down(): Promise<void> {
    this.addSql(`do $$ begin
      if exists (select 1 from payouts group by brand_id, creator_id, run_key having count(*) > 1) then
        raise exception 'a creator has more than one payout in a run (a rerun paid what became due later), '
          'which the schema before Migration20261127000000 cannot hold: nothing was changed';
      end if;
    end $$;`);
    this.addSql(`drop index "payouts_open_unique";`);
    this.addSql(
      `alter table "payouts" add constraint "payouts_run_creator_unique" unique ("brand_id", "creator_id", "run_key");`,
    );
    this.addSql(`alter table "payouts" drop column "finalized_at";`);
  }
}
