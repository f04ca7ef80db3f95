import type { Sql } from '../../db/sql.js';
import { recordset, type WritePart } from '../../db/write-set.js';
import { newId } from '../../shared/ids.js';
import type { MovementKind } from './ledger-movement.entity.js';

/** An ingested event caused the movements. */
export interface Cause {
  brandId: string;
  livemode: boolean;
  eventId: string;
  requestId: string;
}

/** A payout settled the lines: its run's request id and the payout. */
export interface PayoutCause {
  brandId: string;
  livemode: boolean;
  payoutId: string;
  requestId: string;
}

export interface Movement {
  kind: MovementKind;
  creatorId: string | null;
  amount: number;
}

interface SettlementLine {
  id: string;
  brandId: string;
  livemode: boolean;
  orderPk: string;
  creatorId: string | null;
  isNew: boolean;
  touched: boolean;
  /** Sum of the movements recorded in this ingestion. */
  delta: number;
}

export interface MovementRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  entry_id: string;
  creator_id: string | null;
  kind: MovementKind;
  amount: number;
  event_id: string | null;
  request_id: string;
  payout_id: string | null;
}

/**
 * The ledger changes of one ingestion, gathered in memory and written together: each
 * order's settlement line moves by exactly the movements appended for it, so the journal
 * always sums to the entry. Zero movements are not written.
 */
export class Journal {
  private readonly lines = new Map<string, SettlementLine>();
  readonly movements: MovementRow[] = [];

  /** The order's settlement line as loaded; `entryId` null opens a new one (one per order). */
  open(
    scope: { brandId: string; livemode: boolean },
    orderPk: string,
    entryId: string | null,
    creatorId: string | null,
  ) {
    this.lines.set(orderPk, {
      id: entryId ?? newId('le'),
      brandId: scope.brandId,
      livemode: scope.livemode,
      orderPk,
      creatorId,
      isNew: entryId === null,
      touched: entryId === null,
      delta: 0,
    });
  }

  isOpen(orderPk: string): boolean {
    return this.lines.has(orderPk);
  }

  record(cause: Cause | PayoutCause, orderPk: string, creatorId: string | null, movements: Movement[]) {
    const line = this.lines.get(orderPk);
    if (!line) throw new Error(`no settlement line was opened for order ${orderPk}`);
    line.creatorId = creatorId;
    line.touched = true;
    for (const m of movements) {
      if (m.amount === 0) continue;
      line.delta += m.amount;
      this.movements.push({
        id: newId('mv'),
        brand_id: cause.brandId,
        livemode: cause.livemode,
        entry_id: line.id,
        creator_id: m.creatorId,
        kind: m.kind,
        amount: m.amount,
        event_id: 'eventId' in cause ? cause.eventId : null,
        request_id: cause.requestId,
        payout_id: 'payoutId' in cause ? cause.payoutId : null,
      });
    }
  }

  /** Every touched line: a new one opens with the delta as its balance, an existing one moves by it. */
  lineWrites() {
    return [...this.lines.values()]
      .filter((l) => l.touched)
      .map((l) => ({
        id: l.id,
        brand_id: l.brandId,
        livemode: l.livemode,
        order_id: l.orderPk,
        creator_id: l.creatorId,
        delta: l.delta,
      }));
  }
}

/**
 * The movements that take an order's settlement line from what it was to what it must be:
 * a move between creators reverses the old creator's balance and accrues the new one's.
 */
export function movementsBetween(
  before: { creatorId: string | null; balance: number },
  after: { creatorId: string | null; balance: number },
  firstAccrual: boolean,
): Movement[] {
  if (before.creatorId !== after.creatorId) {
    return [
      { kind: 'reversal', creatorId: before.creatorId, amount: -before.balance },
      { kind: 'accrual', creatorId: after.creatorId, amount: after.balance },
    ];
  }
  const delta = after.balance - before.balance;
  return [{ kind: firstAccrual ? 'accrual' : 'adjustment', creatorId: after.creatorId, amount: delta }];
}

/**
 * The set-based writes of a journal. Lines are upserted by primary key: a new line is
 * inserted with its opening balance, an existing (locked) one moves by the delta. The
 * conflict check is an index probe by definition, so no cached plan can turn it into a
 * scan; a line opened concurrently for the same order collides on `order_id` and the
 * transaction is rerun.
 */
export function journalWrites(journal: Journal): WritePart[] {
  return [
    {
      sql: `insert into ledger_entries (id, brand_id, livemode, order_id, creator_id, commission_balance)
            select x.id, x.brand_id, x.livemode, x.order_id, x.creator_id, x.delta
              from ${recordset({ id: 'text', brand_id: 'text', livemode: 'boolean', order_id: 'text', creator_id: 'text', delta: 'bigint' })}
            on conflict (id) do update
               set commission_balance = ledger_entries.commission_balance + excluded.commission_balance,
                   creator_id = excluded.creator_id, updated_at = now()`,
      rows: journal.lineWrites(),
    },
    {
      sql: `insert into ledger_movements (id, brand_id, livemode, entry_id, creator_id, kind, amount, event_id, request_id, payout_id)
            select x.id, x.brand_id, x.livemode, x.entry_id, x.creator_id, x.kind, x.amount, x.event_id, x.request_id, x.payout_id
              from ${recordset({
                id: 'text',
                brand_id: 'text',
                livemode: 'boolean',
                entry_id: 'text',
                creator_id: 'text',
                kind: 'text',
                amount: 'bigint',
                event_id: 'text',
                request_id: 'text',
                payout_id: 'text',
              })}`,
      rows: journal.movements,
    },
  ];
}

/**
 * Erases the settlement lines of test-mode orders with their whole journal (movements first,
 * then the lines), so no line is ever left without the movements that sum to it. Live lines
 * cannot be erased: the journal's append-only trigger refuses, whatever the caller asks.
 */
export async function eraseTestLines(sql: Sql, orderPks: readonly string[]): Promise<void> {
  if (orderPks.length === 0) return;
  const ids = JSON.stringify(orderPks);
  await sql.query(
    `delete from ledger_movements where entry_id in (
       select id from ledger_entries where order_id in (select jsonb_array_elements_text(?::jsonb)) and not livemode)`,
    [ids],
  );
  await sql.query(
    `delete from ledger_entries where order_id in (select jsonb_array_elements_text(?::jsonb)) and not livemode`,
    [ids],
  );
}
