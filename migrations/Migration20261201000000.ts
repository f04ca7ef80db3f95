import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * Commission programs (commission-programs.md): a brand's program versions, numbered per brand,
 * drafts until published with the instant they come into force. A published version is never
 * changed again, and no two of a brand's take effect at the same instant. Keyed by brand; on
 * Citus distributed by it beside the other brand tables (src/db/tables.ts). A new, empty table.
 */
export class Migration20261201000000 extends Migration {
  override name = 'Migration20261201000000';

  override async up(): Promise<void> {
    await this.execute(`create table "commission_program_versions" (
      "brand_id" varchar(255) not null,
      "id" varchar(40) not null,
      "number" int not null,
      "status" text not null default 'draft',
      "note" varchar(200) null,
      "time_zone" varchar(64) not null,
      "rules" jsonb not null,
      "effective_from" timestamptz null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      "published_at" timestamptz null,
      constraint "commission_program_versions_pkey" primary key ("brand_id", "id"),
      constraint "commission_program_versions_number_unique" unique ("brand_id", "number"),
      constraint "commission_program_versions_status_check" check ("status" in ('draft', 'published')),
      constraint "commission_program_versions_published_check"
        check (("status" = 'published') = ("effective_from" is not null and "published_at" is not null))
    );`);
    // The versions in force, in order: what pricing reads, and one instant per published version.
    await this.execute(`create unique index "commission_program_versions_in_force_index"
      on "commission_program_versions" ("brand_id", "effective_from") where "status" = 'published';`);
    await placeCreatedTables(this);
    // After it is placed: on Citus a plain table given a foreign key to a reference table becomes
    // a Citus local table, which is then never distributed by brand.
    await this.execute(`alter table "commission_program_versions" add constraint "commission_program_versions_brand_id_foreign"
      foreign key ("brand_id") references "brands" ("id") on delete cascade;`);
  }

  override async down(): Promise<void> {
    await this.execute(`drop table "commission_program_versions";`);
  }
}
