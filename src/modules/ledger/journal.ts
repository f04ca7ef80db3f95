import {
  brandTable,
  columnRecordset,
  copyRows,
  recordset,
  type Sql,
  type WritePart,
} from '../../db/fast-path/index.js';
import { movementIdOf, newId } from '../../shared/ids.js';
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

/**
 * A request changed the lines without any event of the brand's (a commission recalculation): its
 * movements store the request id, as a payout's do, so the trace finds them by it.
 */
export interface RequestCause {
  brandId: string;
  livemode: boolean;
  requestId: string;
}

export interface Movement {
  kind: MovementKind;
  creatorId: string | null;
  amount: number;
}

export interface MovementRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  order_id: string;
  creator_id: string | null;
  kind: MovementKind;
  amount: number;
  /** Null when the id gives it (`movementIdOf`). */
  event_id: string | null;
  /** A payout's only: an event's movements reach their request through the event. */
  request_id: string | null;
  payout_id: string | null;
}

/**
 * The ledger changes of one ingestion or payout chunk, gathered in memory and written
 * together: each order's settlement line (orders.commission_balance) moves by exactly the
 * movements appended for it, so the journal always sums to the line. Zero movements are not
 * written.
 */
export class Journal {
  private readonly deltas = new Map<string, number>();
  /** Each moved order's brand: its row is found by (brand_id, id). */
  private readonly brands = new Map<string, string>();
  /** Movements recorded per event: the next one's index in its derived id. */
  private readonly perEvent = new Map<string, number>();
  readonly movements: MovementRow[] = [];

  record(cause: Cause | PayoutCause | RequestCause, orderPk: string, movements: Movement[]) {
    for (const m of movements) {
      if (m.amount === 0) continue;
      this.deltas.set(orderPk, (this.deltas.get(orderPk) ?? 0) + m.amount);
      this.brands.set(orderPk, cause.brandId);
      const derived = 'eventId' in cause ? this.nextIdOf(cause.eventId) : null;
      this.movements.push({
        id: derived ?? newId('mv'),
        brand_id: cause.brandId,
        livemode: cause.livemode,
        order_id: orderPk,
        creator_id: m.creatorId,
        kind: m.kind,
        amount: m.amount,
        event_id: 'eventId' in cause && !derived ? cause.eventId : null,
        request_id: 'eventId' in cause ? null : cause.requestId,
        payout_id: 'payoutId' in cause ? cause.payoutId : null,
      });
    }
  }

  private nextIdOf(eventId: string): string | null {
    const index = this.perEvent.get(eventId) ?? 0;
    this.perEvent.set(eventId, index + 1);
    return movementIdOf(eventId, index);
  }

  /** How far the order's settlement line moves: its writer adds this to `commission_balance`. */
  delta(orderPk: string): number {
    return this.deltas.get(orderPk) ?? 0;
  }

  /** The orders whose line moves, except those whose own row write carries the delta. */
  lineMoves(writtenWithOrder: ReadonlySet<string>) {
    return [...this.deltas]
      .filter(([id, delta]) => delta !== 0 && !writtenWithOrder.has(id))
      .map(([id, delta]) => ({ brand_id: this.brands.get(id)!, id, delta }));
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

const movementColumns = {
  id: 'text',
  brand_id: 'text',
  livemode: 'boolean',
  order_id: 'text',
  creator_id: 'text',
  kind: 'text',
  amount: 'bigint',
  event_id: 'text',
  request_id: 'text',
  payout_id: 'text',
};
const movementRecordset = columnRecordset(movementColumns);
const movementCopy = copyRows('ledger_movements', movementColumns);

/** The journal's insert, built once: every group commit writes it. */
const movementInsert = `insert into ${brandTable('ledger_movements')} (id, brand_id, livemode, order_id, creator_id, kind, amount, event_id, request_id, payout_id)
          select x.id, x.brand_id, x.livemode, x.order_id, x.creator_id, x.kind, x.amount, x.event_id, x.request_id, x.payout_id
            from ${movementRecordset.sql}`;

/** The journal's movements, as one set-based insert. */
export function movementWrite(journal: Journal): WritePart {
  return {
    sql: movementInsert,
    rows: journal.movements,
    columns: movementRecordset.columns,
    copy: movementCopy,
  };
}

/**
 * The lines of orders that moved but that the caller does not write itself (a payout settling a
 * clawback on an order it does not pay): each moves by its delta, not to a value, so a
 * concurrent ingestion refunding the same order adds to it. An order row the caller writes in
 * the same statement carries its delta instead (one new row version, not two; and this update
 * could not see an order inserted by the same statement). Ingestion writes every order it moves.
 */
export function lineMoveWrite(journal: Journal, writtenWithOrder: ReadonlySet<string>): WritePart {
  return {
    sql: `update orders o set commission_balance = o.commission_balance + x.delta, updated_at = now()
            from ${recordset({ brand_id: 'text', id: 'text', delta: 'bigint' })}
           where o.brand_id = x.brand_id and o.id = x.id`,
    rows: journal.lineMoves(writtenWithOrder),
  };
}

/**
 * Erases the journal of test-mode orders, before the orders themselves, so no order is ever
 * left with movements that no longer sum to its line. Live movements cannot be erased: the
 * journal's append-only trigger refuses, whatever the caller asks.
 */
export async function eraseTestMovements(
  sql: Sql,
  orderPks: readonly { brand_id: string; id: string }[],
): Promise<void> {
  if (orderPks.length === 0) return;
  await sql.query(
    `delete from ledger_movements m using jsonb_to_recordset(?::jsonb) as x(brand_id text, id text)
      where m.brand_id = x.brand_id and m.order_id = x.id and not m.livemode`,
    [JSON.stringify(orderPks)],
  );
}
