import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { brandPasses } from '../../db/citus.js';
import {
  executeWrites,
  inTransaction,
  inTransactionOn,
  recordset,
  type Sql,
  sqlLiteral,
} from '../../db/fast-path/index.js';
import { newId } from '../../shared/ids.js';
import { Journal, lineMoveWrite, movementWrite } from '../ledger/journal.js';
import { jobTransition } from '../orders/order-lifecycle.js';
import { type RawOrderRow, toOrderOut } from '../orders/order-out.js';
import { jobRequestId } from '../webhooks/job-cause.js';
import { type EventDraft, recordWebhookEvents } from '../webhooks/webhook-writes.js';
import { type PayoutRow, payoutColumns, toPayoutOut } from './payouts.read.js';

const CHUNK = 1000;

/** The lifecycle's job transitions as SQL literals (a fixed enum, so partial indexes still match). */
const sqlStatuses = (statuses: readonly string[]) => statuses.map(sqlLiteral).join(', ');
const confirmation = jobTransition('confirmation_due');
const paying = jobTransition('payout');

/** The order columns an order's webhook event shows (orders/order-out.ts), for RETURNING and selects. */
const orderOutColumns = (o: string) =>
  `${o}.id, ${o}.brand_id, ${o}.order_id, ${o}.livemode, ${o}.status, ${o}.amount, ${o}.original_amount,
   ${o}.original_currency, ${o}.fx_rate::text as fx_rate, ${o}.commission_amount, ${o}.refunded_amount,
   ${o}.refunded_commission_amount, ${o}.attributed_via, ${o}.parent_order_id, ${o}.occurred_at,
   ${o}.confirm_at, ${o}.flags, ${o}.creator_id, ${o}.payout_id`;

type OrderRow = RawOrderRow & { id: string; brand_id: string; payout_id: string | null };

/** An order event's draft: the order as the API shows it, with the payout that paid it. */
const orderEvent = (
  type: 'order.confirmed' | 'order.paid_out',
  row: OrderRow,
  requestId: string,
): EventDraft => ({
  brandId: row.brand_id,
  livemode: row.livemode,
  type,
  requestId,
  data: { object: { ...toOrderOut(row), payout_id: row.payout_id } },
});

/**
 * pending → confirmed once `confirm_at` has passed (both modes: test orders confirm too, they
 * are only never paid out). In chunks of 1000 rows with SKIP LOCKED, so concurrent runs split
 * the rows and an order being ingested is simply taken by the next run. Each chunk writes the
 * order.confirmed webhook events of its orders in its own transaction (for brands with an
 * endpoint subscribed), caused by the job run in progress.
 */
export async function confirmDueOrders(
  em: EntityManager,
  now = new Date(),
  requestId = jobRequestId() ?? 'order-confirmation',
): Promise<number> {
  const pool = (await em.getConnection().getNativeClient()) as pg.Pool;
  const due = `status in (${sqlStatuses(confirmation.from)}) and confirm_at <= ?`;
  let confirmed = 0;
  // On Citus one brand at a time (a locking read over every brand's shards is refused).
  for (const brand of await brandPasses(em, 'orders', due, [now])) {
    const [filter, params] = brand === undefined ? ['', [now]] : ['brand_id = ? and ', [brand, brand, now]];
    for (;;) {
      const rows = await inTransactionOn(pool, async (sql) => {
        const moved = await sql.query<OrderRow>(
          `update orders o set status = ${sqlLiteral(confirmation.to)}, confirmed_at = now(), updated_at = now()
            where ${filter}(o.brand_id, o.id) in (select brand_id, id from orders where ${filter}${due}
                          order by confirm_at limit ${CHUNK} for update skip locked)
           returning ${orderOutColumns('o')}`,
          params,
        );
        await recordWebhookEvents(
          sql,
          moved.map((row) => orderEvent('order.confirmed', row, requestId)),
        );
        return moved.length;
      });
      confirmed += rows;
      if (rows < CHUNK) break;
    }
  }
  return confirmed;
}

/** The payout run of a month: `2026-12` for any instant of December 2026 in Asia/Seoul. */
export function payoutRunKey(at: Date): string {
  // en-CA formats dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat('en-CA', {
    timeZone: 'Asia/Seoul',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  })
    .format(at)
    .slice(0, 7);
}

interface Payee {
  brand_id: string;
  creator_id: string;
}

/** A settlement line to pay: a confirmed order's, or one holding a clawback not netted yet. */
interface SettledLine {
  id: string;
  order_pk: string;
  amount: string;
}

/** What one transaction of a payee's payout did. */
interface Chunk {
  /** Lines paid: orders and clawbacks. */
  items: number;
  /** Payouts made final (and announced). */
  finalized: number;
  /** Nothing of the payee's was left past this chunk: its open payout is final now. */
  last: boolean;
}

/** A payout made final, as its `payout.created` announces it (written in the same transaction). */
const payoutCreated = (payout: PayoutRow & { brand_id: string }, requestId: string): EventDraft => ({
  brandId: payout.brand_id,
  livemode: true,
  type: 'payout.created',
  requestId,
  dedupKey: `payout.created:${payout.id}`,
  data: { object: payoutObject(payout) },
});

/**
 * Serialises a payee's chunks, whichever pass or run key they belong to (a schedule and an admin
 * run that meet, ops pressing "run" twice): the creator's row, locked until the chunk commits.
 * The chunk's reads come after it, each with a snapshot of its own, so they see every line the
 * previous holder paid or netted; without it, one pass locked the orders and the other, skipping
 * them, took the clawbacks, and each finalized a payout of its own (one of them only a clawback,
 * negative). A row of the brand's shard, so it holds on Citus as on PostgreSQL; NO KEY UPDATE,
 * so the foreign-key checks of rows naming the creator (orders, movements) never wait for it.
 */
async function lockPayee(sql: Sql, payee: Payee): Promise<void> {
  await sql.query(`select 1 from creators where brand_id = ? and id = ? for no key update`, [
    payee.brand_id,
    payee.creator_id,
  ]);
}

/**
 * One chunk of one creator's payout, in one transaction, after the payee's lock: up to 1000
 * confirmed live orders and 1000 clawbacks not netted yet, locked with SKIP LOCKED (rows an
 * ingestion holds wait for a later pass; a line is claimed by its row lock and
 * the state it leaves in: the order `paid_out`, the clawback in payout_clawbacks, whose key
 * makes netting it twice impossible). The chunk adds to the payee's open payout of the run
 * (payouts_open_unique: one per brand, creator and run, so passes taking turns share it); the
 * orders take the lifecycle's `payout` transition; the Journal records `payout` movements that
 * take every line involved to zero, so the ledger's "movements sum to the entry" rule is kept in
 * one place. The chunk that finds nothing past it makes the open payout final and writes its
 * payout.created, together: from that commit on the payout never changes, and whatever becomes
 * due later (a rerun of the run key, an order confirmed meanwhile, a row skipped while locked)
 * goes into a new payout with its own id and its own payout.created.
 */
async function payChunk(sql: Sql, payee: Payee, runKey: string, requestId: string): Promise<Chunk> {
  await lockPayee(sql, payee);
  // One row past the chunk tells whether this chunk is the payee's last.
  const found = await sql.query<OrderRow & { settled: string }>(
    `select o.commission_amount - o.refunded_commission_amount as settled, ${orderOutColumns('o')}
       from orders o
      where o.brand_id = ? and o.creator_id = ? and o.livemode and o.status in (${sqlStatuses(paying.from)})
      order by o.id limit ${CHUNK + 1} for update of o skip locked`,
    [payee.brand_id, payee.creator_id],
  );
  const foundClawbacks = await sql.query<SettledLine>(
    `select m.id, m.order_id as order_pk, m.amount
       from ledger_movements m
      where m.brand_id = ? and m.creator_id = ? and m.kind = 'clawback' and m.livemode
        and not exists (select 1 from payout_clawbacks pc where pc.brand_id = m.brand_id and pc.movement_id = m.id)
      order by m.id limit ${CHUNK + 1} for update of m skip locked`,
    [payee.brand_id, payee.creator_id],
  );
  const last = found.length <= CHUNK && foundClawbacks.length <= CHUNK;
  const orders = found.slice(0, CHUNK);
  const clawbacks = foundClawbacks.slice(0, CHUNK);
  const events: EventDraft[] = [];
  if (orders.length > 0 || clawbacks.length > 0)
    events.push(...(await payLines(sql, payee, runKey, requestId, orders, clawbacks)));
  let finalized = 0;
  if (last) {
    const final = await finalizeOpenPayouts(sql, payee, { runKey });
    events.push(...final.map((payout) => payoutCreated(payout, requestId)));
    finalized = final.length;
  }
  await recordWebhookEvents(sql, events);
  return { items: orders.length + clawbacks.length, finalized, last };
}

/** Adds the lines to the payee's open payout of the run (made if there is none); their order.paid_out drafts. */
async function payLines(
  sql: Sql,
  payee: Payee,
  runKey: string,
  requestId: string,
  orders: (OrderRow & { settled: string })[],
  clawbacks: SettledLine[],
): Promise<EventDraft[]> {
  const orderLines: SettledLine[] = orders.map((o) => ({ id: o.id, order_pk: o.id, amount: o.settled }));
  const commission = orderLines.reduce((sum, o) => sum + Number(o.amount), 0);
  const clawback = clawbacks.reduce((sum, m) => sum + Number(m.amount), 0);
  // Only an open payout is added to: a final one is out of the partial unique index, so once a
  // payout is final this inserts a new one.
  const [payout] = await sql.query<{ id: string }>(
    `insert into payouts (id, brand_id, livemode, creator_id, run_key, order_count, commission_amount, clawback_amount, net_amount)
     values (?, ?, true, ?, ?, ?, ?, ?, ?)
     on conflict (brand_id, creator_id, run_key) where finalized_at is null do update set
       order_count = payouts.order_count + excluded.order_count,
       commission_amount = payouts.commission_amount + excluded.commission_amount,
       clawback_amount = payouts.clawback_amount + excluded.clawback_amount,
       net_amount = payouts.net_amount + excluded.net_amount
     returning id`,
    [
      newId('po'),
      payee.brand_id,
      payee.creator_id,
      runKey,
      orders.length,
      commission,
      clawback,
      commission + clawback,
    ],
  );
  const payoutId = payout!.id;
  // A paid order's line goes to zero; a netted clawback's negative amount is settled back.
  const journal = new Journal();
  const scope = { brandId: payee.brand_id, livemode: true };
  const cause = { ...scope, payoutId, requestId };
  for (const line of [...orderLines, ...clawbacks]) {
    journal.record(cause, line.order_pk, [
      { kind: 'payout', creatorId: payee.creator_id, amount: -Number(line.amount) },
    ]);
  }
  await executeWrites(sql, [
    {
      sql: `update orders o set status = ${sqlLiteral(paying.to)}, payout_id = ?, updated_at = now(),
                   commission_balance = o.commission_balance + x.delta
              from ${recordset({ brand_id: 'text', id: 'text', delta: 'bigint' })}
             where o.brand_id = x.brand_id and o.id = x.id`,
      params: [payoutId],
      rows: orders.map((o) => ({ brand_id: payee.brand_id, id: o.id, delta: journal.delta(o.id) })),
    },
    {
      sql: `insert into payout_clawbacks (brand_id, movement_id, payout_id)
            select x.brand_id, x.id, ? from ${recordset({ brand_id: 'text', id: 'text' })}`,
      params: [payoutId],
      rows: clawbacks.map((m) => ({ brand_id: payee.brand_id, id: m.id })),
    },
    lineMoveWrite(journal, new Set(orders.map((o) => o.id))),
    movementWrite(journal),
  ]);
  return orders.map((o) =>
    orderEvent('order.paid_out', { ...o, status: paying.to, payout_id: payoutId }, requestId),
  );
}

/**
 * Makes the payee's open payouts final, with their totals as they stand: those of `runKey`, or
 * those of every other run key (left open by a pass that never finished). Each is then out of
 * payouts_open_unique, so nothing adds to it again.
 */
async function finalizeOpenPayouts(
  sql: Sql,
  payee: Payee,
  runs: { runKey: string } | { otherThan: string },
): Promise<(PayoutRow & { brand_id: string })[]> {
  const [op, runKey] = 'runKey' in runs ? ['=', runs.runKey] : ['<>', runs.otherThan];
  const final = await sql.query<{ id: string }>(
    `update payouts set finalized_at = now()
      where brand_id = ? and creator_id = ? and run_key ${op} ? and finalized_at is null
     returning id`,
    [payee.brand_id, payee.creator_id, runKey],
  );
  if (final.length === 0) return [];
  // Read back by a statement of its own: the API's columns format the cursor with to_char
  // (STABLE), which Citus refuses in RETURNING. A monthly job's one more probe per payout.
  return sql.query<PayoutRow & { brand_id: string }>(
    `select brand_id, ${payoutColumns} from payouts where brand_id = ? and id = any(?::text[]) order by id`,
    [payee.brand_id, final.map((p) => p.id)],
  );
}

/** The payout as its `payout.created` webhook shows it: the API's payout without `created_at`. */
function payoutObject(row: PayoutRow) {
  const { created_at: _, ...object } = toPayoutOut(row);
  return object;
}

/**
 * The payout run (monthly): every live creator with confirmed orders or clawbacks not netted
 * yet gets a payout for `runKey`. Test mode is never paid out. A payout is final once announced:
 * a rerun of the run key (a retry, an admin run) pays only what became due since, into a new
 * payout; a retry of a pass that stopped halfway finishes the payout it left open. Two passes at
 * once take each payee's chunks in turn (`lockPayee`), so they make what one pass makes: one
 * payout per payee, its orders and clawbacks together. Returns what this pass did.
 */
export async function runPayouts(
  orm: MikroORM,
  runKey: string,
  requestId: string,
  onProgress: (done: number, total: number) => Promise<void> = async () => {},
): Promise<{ run_key: string; payees: number; items: number; payouts: number }> {
  // Payees with open payouts too: what an earlier pass paid and did not get to announce.
  const payees = await orm.em.fork().execute<(Payee & { open_elsewhere: boolean })[]>(
    `select brand_id, creator_id, bool_or(open_elsewhere) as open_elsewhere from (
       select distinct brand_id, creator_id, false as open_elsewhere from orders
        where status in (${sqlStatuses(paying.from)}) and livemode and creator_id is not null
       union
       select distinct m.brand_id, m.creator_id, false from ledger_movements m
        where m.kind = 'clawback' and m.livemode and m.creator_id is not null
          and not exists (select 1 from payout_clawbacks pc where pc.brand_id = m.brand_id and pc.movement_id = m.id)
       union
       select distinct brand_id, creator_id, run_key <> ? from payouts where finalized_at is null
     ) due group by brand_id, creator_id`,
    [runKey],
  );
  let items = 0;
  let paidPayees = 0;
  let payouts = 0;
  for (const [i, payee] of payees.entries()) {
    let paid = 0;
    // A pass of another run key that never finished: its open payouts are announced as they
    // stand, in their own transaction (so no transaction locks two payouts), before this run's.
    if (payee.open_elsewhere)
      payouts += await inTransaction(orm, async (sql) => {
        await lockPayee(sql, payee);
        const final = await finalizeOpenPayouts(sql, payee, { otherThan: runKey });
        await recordWebhookEvents(
          sql,
          final.map((payout) => payoutCreated(payout, requestId)),
        );
        return final.length;
      });
    for (;;) {
      const chunk = await inTransaction(orm, (sql) => payChunk(sql, payee, runKey, requestId));
      paid += chunk.items;
      payouts += chunk.finalized;
      if (chunk.last) break;
    }
    items += paid;
    if (paid > 0) paidPayees++;
    await onProgress(i + 1, payees.length);
  }
  await recordRun(orm, runKey, requestId);
  return { run_key: runKey, payees: paidPayees, items, payouts };
}

/**
 * Recorded last: a run that stopped halfway is still due, and running it again pays only the
 * rest. The counters are counted from the run key's payouts (creators paid; lines paid, as
 * payout movements), not added per pass, so reruns and retries never double them and a pass
 * that stopped halfway is counted too. The run's row is locked first, so the count (a statement
 * of its own, with its own snapshot) sees every pass that recorded before this one: two passes
 * finishing together cannot leave the earlier, smaller count.
 */
async function recordRun(orm: MikroORM, runKey: string, requestId: string) {
  await inTransaction(orm, async (sql) => {
    await sql.query(
      `insert into payout_runs (run_key, request_id, payees, items, finished_at) values (?, ?, 0, 0, now())
       on conflict (run_key) do update set request_id = excluded.request_id`,
      [runKey, requestId],
    );
    // Counted by a read of its own, then written: payout_runs is a reference table on Citus,
    // which refuses an UPDATE of one that reads distributed tables.
    const [counts] = await sql.query<{ payees: string; items: string }>(
      `select (select count(distinct (p.brand_id, p.creator_id)) from payouts p where p.run_key = ?) as payees,
              (select count(*) from payouts p join ledger_movements m
                  on m.brand_id = p.brand_id and m.payout_id = p.id and m.kind = 'payout'
                where p.run_key = ?) as items`,
      [runKey, runKey],
    );
    await sql.query(`update payout_runs set finished_at = now(), payees = ?, items = ? where run_key = ?`, [
      counts!.payees,
      counts!.items,
      runKey,
    ]);
  });
}
