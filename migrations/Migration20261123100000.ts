import { Migration } from '@mikro-orm/migrations';

/**
 * Every change to a key or a brand notifies `lf_auth_changed` with the brand id. NOTIFY is
 * delivered at commit, so each web process clears its key cache (src/modules/keys/key-cache.ts)
 * right after a revocation or suspension commits, and never for a rolled-back one.
 */
export class Migration20261123100000 extends Migration {
  override name = 'Migration20261123100000';

  override up(): void | Promise<void> {
    this.addSql(`create or replace function "lf_auth_changed"() returns trigger language plpgsql as $$
      begin
        if tg_table_name = 'brands' then
          perform pg_notify('lf_auth_changed', coalesce(new.id, old.id));
        else
          perform pg_notify('lf_auth_changed', coalesce(new.brand_id, old.brand_id));
        end if;
        return null;
      end $$;`);
    this.addSql(`create trigger "api_keys_lf_auth_changed" after insert or update or delete on "api_keys"
      for each row execute function "lf_auth_changed"();`);
    this.addSql(`create trigger "brands_lf_auth_changed" after update or delete on "brands"
      for each row execute function "lf_auth_changed"();`);
  }

  override down(): void | Promise<void> {
    this.addSql(`drop trigger "brands_lf_auth_changed" on "brands";`);
    this.addSql(`drop trigger "api_keys_lf_auth_changed" on "api_keys";`);
    this.addSql(`drop function "lf_auth_changed"();`);
  }
}
