import { Migration } from '@mikro-orm/migrations';

/**
 * The hot tables' one-column value lists as domains instead of table CHECKs. PostgreSQL reads a
 * table's CHECKs back from their stored text for every statement that writes a row, which for a
 * single event's write cost more than any other part of the constraint work; a domain's
 * constraints are parsed once per server process and kept (docs/decisions.md). Same values, same
 * refusals (23514, check_violation).
 *
 * Without a table rewrite: the column first becomes a domain with no constraint (binary
 * coercible, a catalog change under a brief exclusive lock), then the domain gets its constraint
 * NOT VALID, which holds for every row written from then on. The table CHECK dropped in the same
 * transaction has held for every row already there, so validating (a scan of the table under a
 * lock that stops writes) would prove nothing new.
 */
const lists = [
  {
    table: 'orders',
    column: 'status',
    domain: 'order_status',
    check: 'orders_status_check',
    values: ['unattributed', 'pending', 'confirmed', 'paid_out', 'refunded', 'cancelled'],
  },
  {
    table: 'orders',
    column: 'attributed_via',
    domain: 'order_attributed_via',
    check: 'orders_attributed_via_check',
    values: ['code', 'click', 'renewal'],
  },
  {
    table: 'ledger_movements',
    column: 'kind',
    domain: 'movement_kind',
    check: 'ledger_movements_kind_check',
    values: ['accrual', 'adjustment', 'reversal', 'clawback', 'payout'],
  },
] as const;

const valueList = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ');

export class Migration20261205000000 extends Migration {
  override name = 'Migration20261205000000';

  override async up(): Promise<void> {
    for (const l of lists) {
      await this.execute(`create domain "${l.domain}" as text;`);
      await this.execute(`alter table "${l.table}" alter column "${l.column}" type "${l.domain}";`);
      await this.execute(
        `alter domain "${l.domain}" add constraint "${l.domain}_check" check (value in (${valueList(l.values)})) not valid;`,
      );
      await this.execute(`alter table "${l.table}" drop constraint "${l.check}";`);
    }
  }

  override async down(): Promise<void> {
    for (const l of lists) {
      await this.execute(
        `alter table "${l.table}" add constraint "${l.check}" check ("${l.column}" in (${valueList(l.values)}));`,
      );
      await this.execute(`alter table "${l.table}" alter column "${l.column}" type text;`);
      await this.execute(`drop domain "${l.domain}";`);
    }
  }
}
