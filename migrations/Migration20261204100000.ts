import { Migration } from '@mikro-orm/migrations';

/**
 * Whether a brand has ever published a commission program version, read with its API key (the
 * key cache carries it like the brand's other terms): a group of a brand without one loads no
 * versions, so a brand without a program costs what it did before programs. Set by the first
 * publish, never unset (published versions are never withdrawn). Filled from the versions in two
 * statements: on Citus brands is a reference table, which an update joined to a distributed
 * table cannot write.
 */
export class Migration20261204100000 extends Migration {
  override name = 'Migration20261204100000';

  override async up(): Promise<void> {
    await this.execute(
      `alter table "brands" add column "has_commission_program" boolean not null default false;`,
    );
    const rows = (await this.execute(
      `select distinct brand_id from commission_program_versions where status = 'published'`,
    )) as { brand_id: string }[];
    if (rows.length > 0)
      await this.execute(
        'update brands set has_commission_program = true where id in (select jsonb_array_elements_text(?::jsonb))',
        [JSON.stringify(rows.map((r) => r.brand_id))],
      );
  }

  override async down(): Promise<void> {
    await this.execute(`alter table "brands" drop column if exists "has_commission_program";`);
  }
}
