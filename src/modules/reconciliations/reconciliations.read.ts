import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { pageFrom } from '../../shared/paging.js';
import { signedCursor } from '../../shared/signed-cursor.js';
import type { ApiCaller } from '../keys/caller.js';
import type { DifferenceKind, DifferenceOutput, ReconciliationOutput } from './reconciliations.schemas.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;

export interface ReconciliationRow {
  id: string;
  livemode: boolean;
  period_from: Date | string;
  period_to: Date | string;
  status: 'processing' | 'completed' | 'failed';
  rows: number;
  orders: number;
  matched: number;
  differences: Record<string, number>;
  fixable: number;
  at_stake_amount: string | number;
  at_stake_commission: string | number;
  as_of: Date | string | null;
  created_at: Date | string;
  completed_at: Date | string | null;
}

const iso = (d: Date | string) => new Date(d).toISOString();

export const toReconciliationOut = (r: ReconciliationRow): ReconciliationOutput => ({
  id: r.id,
  object: 'reconciliation',
  livemode: r.livemode,
  from: iso(r.period_from),
  to: iso(r.period_to),
  status: r.status,
  rows: r.rows,
  orders: r.orders,
  matched: r.matched,
  differences: r.differences,
  fixable: r.fixable,
  at_stake: { amount: Number(r.at_stake_amount), commission: Number(r.at_stake_commission) },
  as_of: r.as_of === null ? null : iso(r.as_of),
  created_at: iso(r.created_at),
  completed_at: r.completed_at === null ? null : iso(r.completed_at),
});

export const reconciliationNotFound = (caller: Caller, id: string) =>
  new AppError(
    'reconciliation_not_found',
    `No reconciliation '${id.slice(0, 60)}' belongs to this brand in ${caller.livemode ? 'live' : 'test'} mode.`,
    {
      param: 'reconciliation_id',
      hint: 'Use the id POST /v1/reconciliations answered, with a key of the same mode; reconciliations are kept 30 days.',
    },
  );

/**
 * Whether a difference is fixable now: as compared, unless the order.paid its fix sends has since
 * passed api-v1's 90 days (reconciliation.md, "The resend"). `d` the differences row.
 */
export const fixableNow = (d = 'd') =>
  `(${d}.fixable and (${d}.fix_at is null or ${d}.fix_at >= now() - interval '90 days'))`;

/** The count as compared until its first fix expires (`fixable_until`), then counted again. */
const columns = `id, livemode, period_from, period_to, status, rows, orders, matched, differences,
  case when fixable_until is null or fixable_until > now() then fixable
       else (select count(*)::int from reconciliation_differences d
              where d.brand_id = reconciliations.brand_id and d.reconciliation_id = reconciliations.id
                and ${fixableNow()}) end as fixable,
  at_stake_amount, at_stake_commission, as_of, created_at, completed_at`;

export async function findReconciliation(
  em: EntityManager,
  caller: Caller,
  id: string,
): Promise<ReconciliationRow> {
  const [row] = await em.execute<ReconciliationRow[]>(
    `select ${columns} from reconciliations where brand_id = ? and id = ? and livemode = ?`,
    [caller.brandId, id, caller.livemode],
  );
  if (!row) throw reconciliationNotFound(caller, id);
  return row;
}

const listCursor = signedCursor(
  'reconciliations-cursor',
  z.strictObject({ t: z.string().min(1), i: z.string().min(1) }),
  'nothing',
);

/** Newest first: a brand looks for last night's. */
export async function listReconciliations(
  em: EntityManager,
  caller: Caller,
  input: { limit: number; cursor?: string | undefined },
  secretKeyBase: string,
) {
  const scope = { brandId: caller.brandId, livemode: caller.livemode, filters: {} };
  const after = input.cursor === undefined ? null : listCursor.decode(secretKeyBase, input.cursor, scope);
  const rows = await em.execute<(ReconciliationRow & { cursor_at: string })[]>(
    `select ${columns}, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at
       from reconciliations where brand_id = ? and livemode = ?
       ${after ? 'and (created_at, id) < (?::timestamptz, ?)' : ''}
      order by created_at desc, id desc limit ?`,
    [caller.brandId, caller.livemode, ...(after ? [after.t, after.i] : []), input.limit + 1],
  );
  const { page, hasMore, last } = pageFrom(rows, input.limit);
  return {
    data: page.map(toReconciliationOut),
    has_more: hasMore,
    next_cursor: last ? listCursor.encode(secretKeyBase, scope, { t: last.cursor_at, i: last.id }) : null,
  };
}

export interface DifferenceRow {
  seq: number;
  kind: DifferenceKind;
  order_id: string;
  brand: Record<string, unknown> | null;
  ours: DifferenceOutput['ours'];
  refusal: string | null;
  fixable: boolean;
  reason: string | null;
  amount_at_stake: string | number;
  commission_at_stake: string | number;
}

export const toDifferenceOut = (d: DifferenceRow): DifferenceOutput => ({
  object: 'reconciliation_difference',
  kind: d.kind,
  order_id: d.order_id,
  brand: d.brand,
  ours: d.ours,
  refusal: d.refusal,
  fixable: d.fixable,
  reason: d.reason,
  amount_at_stake: Number(d.amount_at_stake),
  commission_at_stake: Number(d.commission_at_stake),
});

const seqCursor = (label: string) =>
  signedCursor(label, z.strictObject({ s: z.int().min(0) }), 'its filters');
const differencesCursor = seqCursor('reconciliation-differences-cursor');

/** In the order of the brand's lines, then ours the brand lacks; by (brand, reconciliation, kind or fixable, seq). */
export async function listDifferences(
  em: EntityManager,
  caller: Caller,
  id: string,
  input: {
    limit: number;
    cursor?: string | undefined;
    kind?: DifferenceKind | undefined;
    fixable?: boolean | undefined;
  },
  secretKeyBase: string,
) {
  await findReconciliation(em, caller, id);
  const scope = {
    brandId: caller.brandId,
    livemode: caller.livemode,
    filters: {
      reconciliation_id: id,
      kind: input.kind ?? null,
      fixable: input.fixable === undefined ? null : String(input.fixable),
    },
  };
  const after =
    input.cursor === undefined ? null : differencesCursor.decode(secretKeyBase, input.cursor, scope);
  const where = ['d.brand_id = ?', 'd.reconciliation_id = ?'];
  const params: unknown[] = [caller.brandId, id];
  if (input.kind !== undefined) {
    where.push('d.kind = ?');
    params.push(input.kind);
  }
  if (input.fixable !== undefined) where.push(input.fixable ? fixableNow() : `not ${fixableNow()}`);
  if (after) {
    where.push('d.seq > ?');
    params.push(after.s);
  }
  const rows = await em.execute<DifferenceRow[]>(
    `select seq, kind, order_id, brand, ours, refusal, ${fixableNow()} as fixable,
            case when d.fixable and not ${fixableNow()} then 'too_old_to_resend' else d.reason end as reason,
            amount_at_stake, commission_at_stake
       from reconciliation_differences d where ${where.join(' and ')} order by seq limit ?`,
    [...params, input.limit + 1],
  );
  const { page, hasMore, last } = pageFrom(rows, input.limit);
  return {
    data: page.map(toDifferenceOut),
    has_more: hasMore,
    next_cursor: last ? differencesCursor.encode(secretKeyBase, scope, { s: last.seq }) : null,
  };
}

export const resendCursor = seqCursor('reconciliation-resend-cursor');
