import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../shared/ids.js';
import type { MovementKind } from './ledger-movement.entity.js';

export interface Cause {
  brandId: string;
  livemode: boolean;
  eventId: string;
  requestId: string;
}

export interface Movement {
  kind: MovementKind;
  creatorId: string | null;
  amount: number;
}

/** Opens the order's settlement line (one per order, enforced by a unique constraint). */
export async function openLedgerEntry(em: EntityManager, cause: Cause, orderPk: string): Promise<string> {
  const id = newId('le');
  await em.execute(`insert into ledger_entries (id, brand_id, livemode, order_id) values (?, ?, ?, ?)`, [
    id,
    cause.brandId,
    cause.livemode,
    orderPk,
  ]);
  return id;
}

/**
 * Appends movements to the journal and moves the entry's balance by their sum in the same
 * transaction, so the journal always sums to the entry. Zero movements are not written.
 */
export async function recordMovements(
  em: EntityManager,
  cause: Cause,
  orderPk: string,
  creatorId: string | null,
  movements: Movement[],
) {
  const real = movements.filter((m) => m.amount !== 0);
  const [entry] = await em.execute<{ id: string }[]>(
    `update ledger_entries set commission_balance = commission_balance + ?, creator_id = ?, updated_at = now()
      where order_id = ? returning id`,
    [real.reduce((sum, m) => sum + m.amount, 0), creatorId, orderPk],
  );
  for (const m of real) {
    await em.execute(
      `insert into ledger_movements (id, brand_id, livemode, entry_id, creator_id, kind, amount, event_id, request_id)
       values (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        newId('mv'),
        cause.brandId,
        cause.livemode,
        entry!.id,
        m.creatorId,
        m.kind,
        m.amount,
        cause.eventId,
        cause.requestId,
      ],
    );
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
