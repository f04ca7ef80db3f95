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

/**
 * Moves the order's settlement line by the movements and appends them to the journal in
 * the same transaction, so the journal always sums to the entry. A new order's line is
 * opened here (one per order, enforced by a unique constraint). Zero movements are not written.
 */
export async function recordMovements(
  em: EntityManager,
  cause: Cause,
  order: { pk: string; isNew: boolean },
  creatorId: string | null,
  movements: Movement[],
) {
  const real = movements.filter((m) => m.amount !== 0);
  const total = real.reduce((sum, m) => sum + m.amount, 0);
  const [entry] = order.isNew
    ? await em.execute<{ id: string }[]>(
        `insert into ledger_entries (id, brand_id, livemode, order_id, creator_id, commission_balance)
         values (?, ?, ?, ?, ?, ?) returning id`,
        [newId('le'), cause.brandId, cause.livemode, order.pk, creatorId, total],
      )
    : await em.execute<{ id: string }[]>(
        `update ledger_entries set commission_balance = commission_balance + ?, creator_id = ?, updated_at = now()
          where order_id = ? returning id`,
        [total, creatorId, order.pk],
      );
  if (real.length === 0) return;
  await em.execute(
    `insert into ledger_movements (id, brand_id, livemode, entry_id, creator_id, kind, amount, event_id, request_id)
     values ${real.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
    real.flatMap((m) => [
      newId('mv'),
      cause.brandId,
      cause.livemode,
      entry!.id,
      m.creatorId,
      m.kind,
      m.amount,
      cause.eventId,
      cause.requestId,
    ]),
  );
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
