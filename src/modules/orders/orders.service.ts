import type { EntityManager } from '@mikro-orm/postgresql';
import { onCitus } from '../../db/citus.js';
import { AppError } from '../../shared/errors.js';
import type { ApiCaller } from '../keys/caller.js';
import { type CursorScope, decodeCursor, encodeCursor, type ListFilters } from './cursor.js';
import { oneOrderWhere } from './lookup-key.js';
import type { OrderStatus } from './order.entity.js';
import { type OrderOutput, type RawOrderRow, toOrderOut } from './order-out.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;

export async function getOrder(em: EntityManager, caller: Caller, orderId: string): Promise<OrderOutput> {
  // By a unique key, whatever the statistics say; on Citus routed to the brand's shard alone.
  const where = oneOrderWhere('o', caller, orderId, await onCitus(em));
  const [row] = await em.execute<RawOrderRow[]>(`select * from orders o where ${where.sql}`, where.params);
  if (!row) {
    throw new AppError(
      'order_not_found',
      `No order with order_id '${orderId}' was ingested for this brand in ${caller.livemode ? 'live' : 'test'} mode.`,
      {
        param: 'order_id',
        hint: 'Orders sent with a test key are only visible to test keys, and live ones to live keys.',
      },
    );
  }
  return toOrderOut(row);
}

export interface ListOrdersInput {
  limit: number;
  cursor?: string | undefined;
  /** Instants in UTC ISO form (see canonicalInstant in http/query-instant.ts), inclusive lower and exclusive upper bound. */
  occurredAtGte?: string | undefined;
  occurredAtLt?: string | undefined;
  status?: OrderStatus | undefined;
}

export interface OrderPage {
  data: OrderOutput[];
  has_more: boolean;
  next_cursor: string | null;
}

type ListedRow = RawOrderRow & { id: string; cursor_occurred_at: string };

/**
 * One keyset query over orders_list_index (brand_id, livemode, occurred_at, id), ascending;
 * one row beyond `limit` tells whether another page exists.
 */
export async function listOrders(
  em: EntityManager,
  caller: Caller,
  input: ListOrdersInput,
  secretKeyBase: string,
): Promise<OrderPage> {
  const filters: ListFilters = {
    occurredAtGte: input.occurredAtGte ?? null,
    occurredAtLt: input.occurredAtLt ?? null,
    status: input.status ?? null,
  };
  const scope: CursorScope = { brandId: caller.brandId, livemode: caller.livemode, filters };
  const after = input.cursor === undefined ? null : decodeCursor(secretKeyBase, input.cursor, scope);

  const where = ['brand_id = ?', 'livemode = ?'];
  const params: unknown[] = [caller.brandId, caller.livemode];
  if (after) {
    where.push('(occurred_at, id) > (?::timestamptz, ?)');
    params.push(after.occurredAt, after.id);
  }
  if (filters.occurredAtGte !== null) {
    where.push('occurred_at >= ?::timestamptz');
    params.push(filters.occurredAtGte);
  }
  if (filters.occurredAtLt !== null) {
    where.push('occurred_at < ?::timestamptz');
    params.push(filters.occurredAtLt);
  }
  if (filters.status !== null) {
    where.push('status = ?');
    params.push(filters.status);
  }
  params.push(input.limit + 1);

  // A page must walk orders_list_index in order and stop after limit + 1 rows. Without
  // statistics (a fresh or bulk-loaded table) the planner guesses a few rows match and
  // prefers collecting them all and sorting: 1.5 s a page at a million orders. With sorts and
  // bitmap scans off for this transaction, the ordered index walk is the only plan left.
  const rows = await em.transactional(async (tx) => {
    await tx.execute(
      `select set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)`,
    );
    return tx.execute<ListedRow[]>(
      `select *, to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_occurred_at
         from orders
        where ${where.join(' and ')}
        order by occurred_at, id
        limit ?`,
      params,
    );
  });
  const hasMore = rows.length > input.limit;
  const page = hasMore ? rows.slice(0, input.limit) : rows;
  const last = page.at(-1);
  return {
    data: page.map(toOrderOut),
    has_more: hasMore,
    next_cursor:
      hasMore && last
        ? encodeCursor(secretKeyBase, scope, { occurredAt: last.cursor_occurred_at, id: last.id })
        : null,
  };
}
