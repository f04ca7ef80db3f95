import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { pageFrom } from '../../shared/paging.js';
import { signedCursor } from '../../shared/signed-cursor.js';
import type { ApiCaller } from '../keys/caller.js';
import { tiersAt } from '../programs/creator-tiers.js';
import { creatorBalancesSql } from './balance-tallies.js';
import type { CreatorOutput } from './creators.schemas.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;
type Balance = CreatorOutput['balance'];

const emptyBalance = (): Balance => ({
  currency: 'KRW',
  pending: 0,
  payable: 0,
  paid_out: 0,
  clawback_pending: 0,
});

/**
 * The creators' balances, from the ledger: every open settlement line (a non-zero
 * orders.commission_balance) counts for its order's creator as pending (order `pending`),
 * payable (any other status: the lifecycle leaves no other positive line) or, when negative, a
 * clawback not netted yet; paid out is the net of the creator's payouts. Lines of paid-out orders
 * are zero. The open lines are summed as they move, per creator (balance-tallies.ts), so this is
 * one probe per creator however many orders it has.
 */
async function balancesOf(
  em: EntityManager,
  caller: Caller,
  creatorIds: string[],
): Promise<Map<string, Balance>> {
  const balances = new Map(creatorIds.map((id) => [id, emptyBalance()]));
  if (creatorIds.length === 0) return balances;
  const ids = JSON.stringify(creatorIds);
  const scope = [caller.brandId, caller.livemode];
  const open = await em.execute<
    { creator_id: string; pending: string; payable: string; clawback_pending: string }[]
  >(creatorBalancesSql, [ids, ...scope, ...scope]);
  for (const row of open) {
    const balance = balances.get(row.creator_id)!;
    balance.pending = Number(row.pending);
    balance.payable = Number(row.payable);
    balance.clawback_pending = Number(row.clawback_pending);
  }
  const paid = await em.execute<{ creator_id: string; amount: string }[]>(
    `select creator_id, sum(net_amount)::text as amount from payouts
      where brand_id = ? and livemode = ? and creator_id in (select jsonb_array_elements_text(?::jsonb))
      group by 1`,
    [caller.brandId, caller.livemode, ids],
  );
  for (const row of paid) balances.get(row.creator_id)!.paid_out = Number(row.amount);
  return balances;
}

interface CreatorRow {
  id: string;
  name: string;
  created_at: Date;
}

async function withCodesAndBalances(
  em: EntityManager,
  caller: Caller,
  rows: CreatorRow[],
): Promise<CreatorOutput[]> {
  const ids = rows.map((r) => r.id);
  const codes = ids.length
    ? await em.execute<{ creator_id: string; code: string; offer_id: string | null }[]>(
        `select creator_id, code, offer_id from coupon_codes
          where brand_id = ? and creator_id in (select jsonb_array_elements_text(?::jsonb)) order by code_key`,
        [caller.brandId, JSON.stringify(ids)],
      )
    : [];
  const balances = await balancesOf(em, caller, ids);
  const tiers = await tiersAt((text, values) => em.execute(text, values), caller.brandId, ids);
  return rows.map((r) => ({
    id: r.id,
    object: 'creator',
    livemode: caller.livemode,
    name: r.name,
    codes: codes.filter((c) => c.creator_id === r.id).map((c) => ({ code: c.code, offer_id: c.offer_id })),
    balance: balances.get(r.id)!,
    created_at: new Date(r.created_at).toISOString(),
    tier: tiers.get(r.id) ?? null,
  }));
}

/** The brand's creator, or 404 `creator_not_found`. */
export async function findCreator(em: EntityManager, caller: Caller, creatorId: string): Promise<CreatorRow> {
  const [row] = await em.execute<CreatorRow[]>(
    `select id, name, created_at from creators where id = ? and brand_id = ?`,
    [creatorId, caller.brandId],
  );
  if (!row)
    throw new AppError('creator_not_found', `The brand has no creator '${creatorId}'.`, {
      param: 'creator_id',
      hint: 'Use a creator id from GET /v1/creators or from an order’s creator_id.',
    });
  return row;
}

export async function getCreator(
  em: EntityManager,
  caller: Caller,
  creatorId: string,
): Promise<CreatorOutput> {
  return (await withCodesAndBalances(em, caller, [await findCreator(em, caller, creatorId)]))[0]!;
}

const creatorCursor = signedCursor('creators-cursor', z.strictObject({ i: z.string().min(1) }), 'filters');

/** The brand's creators by id (creation order), with their codes and this mode's balances. */
export async function listCreators(
  em: EntityManager,
  caller: Caller,
  input: { limit: number; cursor?: string | undefined },
  secretKeyBase: string,
) {
  const scope = { brandId: caller.brandId, livemode: caller.livemode, filters: {} };
  const after = input.cursor === undefined ? null : creatorCursor.decode(secretKeyBase, input.cursor, scope);
  const rows = await em.execute<CreatorRow[]>(
    `select id, name, created_at from creators where brand_id = ? ${after ? 'and id > ?' : ''} order by id limit ?`,
    [caller.brandId, ...(after ? [after.i] : []), input.limit + 1],
  );
  const { page, hasMore, last } = pageFrom(rows, input.limit);
  return {
    data: await withCodesAndBalances(em, caller, page),
    has_more: hasMore,
    next_cursor: last ? creatorCursor.encode(secretKeyBase, scope, { i: last.id }) : null,
  };
}
