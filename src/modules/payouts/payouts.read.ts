import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { pageFrom } from '../../shared/paging.js';
import { signedCursor } from '../../shared/signed-cursor.js';
import type { ApiCaller } from '../keys/caller.js';
import { conversionIdOf } from '../orders/conversion-id.js';
import type { PayoutLineOutput, PayoutOutput } from './payouts.schemas.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;

export interface PayoutRow {
  id: string;
  livemode: boolean;
  creator_id: string;
  run_key: string;
  order_count: number;
  commission_amount: string;
  clawback_amount: string;
  net_amount: string;
  created_at: Date;
  cursor_at: string;
}

/**
 * A payout as the API shows it: made when it became final (with its payout.created), so its
 * `created_at` is `finalized_at` (the row's own created_at is when its first chunk was paid).
 */
export const payoutColumns = `id, livemode, creator_id, run_key, order_count, commission_amount, clawback_amount, net_amount,
  finalized_at as created_at, to_char(finalized_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at`;

/**
 * Only final payouts are shown: one still open (a run paying its creator, or stopped halfway and
 * due again) may grow, and a brand must never read, or pay from, totals that change.
 */
const final = 'finalized_at is not null';

export const toPayoutOut = (p: PayoutRow): PayoutOutput => ({
  id: p.id,
  object: 'payout',
  livemode: p.livemode,
  creator_id: p.creator_id,
  run_key: p.run_key,
  order_count: p.order_count,
  commission_amount: Number(p.commission_amount),
  clawback_amount: Number(p.clawback_amount),
  net_amount: Number(p.net_amount),
  currency: 'KRW',
  created_at: new Date(p.created_at).toISOString(),
});

const payoutNotFound = (caller: Caller, payoutId: string) =>
  new AppError(
    'payout_not_found',
    `No payout '${payoutId}' belongs to this brand in ${caller.livemode ? 'live' : 'test'} mode.`,
    {
      param: 'payout_id',
      hint: 'Payouts are made in live mode only: read them with a live secret key, by the id a payout.created webhook names.',
    },
  );

export async function getPayout(em: EntityManager, caller: Caller, payoutId: string): Promise<PayoutOutput> {
  const [row] = await em.execute<PayoutRow[]>(
    `select ${payoutColumns} from payouts where id = ? and brand_id = ? and livemode = ? and ${final}`,
    [payoutId, caller.brandId, caller.livemode],
  );
  if (!row) throw payoutNotFound(caller, payoutId);
  return toPayoutOut(row);
}

const payoutCursor = signedCursor(
  'payouts-cursor',
  z.strictObject({ t: z.string().min(1), i: z.string().min(1) }),
  'creator_id and run_key',
);

/**
 * Ascending by (created_at, id), like orders: a reconciliation reads forward from where it stopped.
 * A payout is placed by when it became final, not by its first chunk: one a run paid in many chunks
 * is not placed behind payouts a reader has already passed.
 */
export async function listPayouts(
  em: EntityManager,
  caller: Caller,
  input: {
    limit: number;
    cursor?: string | undefined;
    creatorId?: string | undefined;
    runKey?: string | undefined;
  },
  secretKeyBase: string,
) {
  const scope = {
    brandId: caller.brandId,
    livemode: caller.livemode,
    filters: { creator_id: input.creatorId ?? null, run_key: input.runKey ?? null },
  };
  const after = input.cursor === undefined ? null : payoutCursor.decode(secretKeyBase, input.cursor, scope);
  const where = ['brand_id = ?', 'livemode = ?', final];
  const params: unknown[] = [caller.brandId, caller.livemode];
  if (after) {
    where.push('(finalized_at, id) > (?::timestamptz, ?)');
    params.push(after.t, after.i);
  }
  if (input.creatorId !== undefined) {
    where.push('creator_id = ?');
    params.push(input.creatorId);
  }
  if (input.runKey !== undefined) {
    where.push('run_key = ?');
    params.push(input.runKey);
  }
  const rows = await em.execute<PayoutRow[]>(
    `select ${payoutColumns} from payouts where ${where.join(' and ')} order by finalized_at, id limit ?`,
    [...params, input.limit + 1],
  );
  const { page, hasMore, last } = pageFrom(rows, input.limit);
  return {
    data: page.map(toPayoutOut),
    has_more: hasMore,
    next_cursor: last ? payoutCursor.encode(secretKeyBase, scope, { t: last.cursor_at, i: last.id }) : null,
  };
}

interface LineRow {
  id: string;
  amount: string;
  order_id: string;
  order_pk: string;
  creator_id: string | null;
  conversion_id: string | null;
}

const lineCursor = signedCursor('payout-lines-cursor', z.strictObject({ i: z.string().min(1) }), 'payout_id');

/**
 * The payout's lines, from the ledger: every `payout` movement it recorded settles one line,
 * an order's (the movement takes the order's positive balance to zero) or a clawback's (it
 * takes a negative balance back to zero). A line's amount is the balance it settled, so the
 * lines sum to the payout's `net_amount`, its orders to `commission_amount` and its clawbacks
 * to `clawback_amount`.
 */
export async function listPayoutLines(
  em: EntityManager,
  caller: Caller,
  payoutId: string,
  input: { limit: number; cursor?: string | undefined },
  secretKeyBase: string,
) {
  await getPayout(em, caller, payoutId);
  const scope = { brandId: caller.brandId, livemode: caller.livemode, filters: { payout_id: payoutId } };
  const after = input.cursor === undefined ? null : lineCursor.decode(secretKeyBase, input.cursor, scope);
  const rows = await em.execute<LineRow[]>(
    `select m.id, m.amount, o.order_id, o.id as order_pk, o.creator_id, o.conversion_id
       from ledger_movements m
       join orders o on o.brand_id = m.brand_id and o.id = m.order_id
      where m.payout_id = ? and m.kind = 'payout' and m.brand_id = ? and m.livemode = ? ${after ? 'and m.id > ?' : ''}
      order by m.id limit ?`,
    [payoutId, caller.brandId, caller.livemode, ...(after ? [after.i] : []), input.limit + 1],
  );
  const { page, hasMore, last } = pageFrom(rows, input.limit);
  return {
    data: page.map(
      (r): PayoutLineOutput => ({
        id: r.id,
        object: 'payout_line',
        kind: Number(r.amount) < 0 ? 'order' : 'clawback',
        order_id: r.order_id,
        conversion_id: conversionIdOf({ ...r, id: r.order_pk }),
        amount: -Number(r.amount),
        currency: 'KRW',
      }),
    ),
    has_more: hasMore,
    next_cursor: last ? lineCursor.encode(secretKeyBase, scope, { i: last.id }) : null,
  };
}
