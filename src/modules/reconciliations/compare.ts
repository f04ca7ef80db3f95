import { setTimeout as sleep } from 'node:timers/promises';
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { onCitus } from '../../db/citus.js';
import {
  type HotQuery,
  hotQuery,
  inTransaction,
  inTransactionOn,
  type Sql,
  type TransactionSettings,
} from '../../db/fast-path/index.js';
import { CLICK_SKEW_MS } from '../attribution/resolve.js';
import { orderLookupKeySql } from '../orders/lookup-key.js';
import { recordWebhookEvents } from '../webhooks/webhook-writes.js';
import { type ReconciliationRow, toReconciliationOut } from './reconciliations.read.js';
import { type DifferenceKind, differenceKinds } from './reconciliations.schemas.js';

/** `:name` placeholders to the `?` ones Sql takes, with the values in their order. */
export function named(text: string, values: Record<string, unknown>): [string, unknown[]] {
  const ordered: unknown[] = [];
  const out = text.replace(/:([a-z_]+)\b/g, (whole, name: string) => {
    if (!Object.hasOwn(values, name)) return whole;
    ordered.push(values[name]);
    return '?';
  });
  return [out, ordered];
}

/** KRW of `amount` minor units of `currency` at `rate` (KRW per major unit), half up; null without a rate. */
const krwAt = (amount: string, currency: string, rate: string) =>
  `(case when ${currency} = 'KRW' then (${amount})::bigint when ${rate} is null then null
     else round((${amount})::numeric / (case when ${currency} in ('JPY') then 1 else 100 end) * ${rate})::bigint end)`;

/** An order.paid dated before this (the api-v1 90-day limit) cannot be sent. */
const tooOld = (at: string) => `(${at} < :now::timestamptz - interval '90 days')`;

/** Each kind of difference: where it applies, its reason when not fixable, the KRW at stake and the creator's rate in question. */
const kinds: {
  ord: number;
  kind: DifferenceKind;
  applies: string;
  reason: string;
  stake: string;
  bps: string;
}[] = [
  {
    ord: 1,
    kind: 'missing_here',
    applies: 'has_r and not has_o',
    reason: `case when r_currency <> 'KRW' and r_fx_rate is null then 'missing_fx_rate'
             when ${tooOld('r_occurred_at')} then 'too_old_to_resend' end`,
    stake: krwAt('r_amount', 'r_currency', 'r_fx_rate'),
    bps: 'case when row_creator is not null then coalesce(row_bps, :default_bps) end',
  },
  {
    ord: 2,
    kind: 'missing_there',
    applies: 'has_o and not has_r and in_period',
    reason: "'not_in_brand_books'",
    stake: 'o_amount_krw',
    bps: 'case when o_creator_id is not null then coalesce(o_bps, :default_bps) end',
  },
  {
    ord: 3,
    kind: 'currency_mismatch',
    applies: 'has_r and has_o and r_currency <> o_currency',
    reason: "'currency_is_fixed'",
    stake: `abs(o_amount_krw - coalesce(${krwAt('r_amount', 'r_currency', 'r_fx_rate')}, 0))`,
    bps: 'case when o_creator_id is not null then coalesce(o_bps, :default_bps) end',
  },
  {
    ord: 4,
    kind: 'amount_mismatch',
    applies: 'amount_differs',
    reason: `case when paid_out then 'paid_out' when closed then 'closed' when r_amount < o_refunded then 'below_refunded'
             when ${tooOld('o_occurred_at')} then 'too_old_to_resend' end`,
    stake: krwAt('abs(r_amount - o_amount)', 'o_currency', 'o_fx_rate'),
    bps: 'case when o_creator_id is not null then coalesce(o_bps, :default_bps) end',
  },
  {
    ord: 5,
    kind: 'refund_mismatch',
    applies: `has_r and has_o and r_currency = o_currency and r_refunded <> o_refunded
          and not (r_status = 'cancelled' and closed)`,
    reason: `case when r_refunded < o_refunded then 'refunded_more_here'
             when r_refunded > (case when amount_fixed then r_amount else o_amount end) then 'refund_exceeds_amount' end`,
    stake: krwAt('abs(r_refunded - o_refunded)', 'o_currency', 'o_fx_rate'),
    bps: 'case when o_creator_id is not null then coalesce(o_bps, :default_bps) end',
  },
  {
    ord: 6,
    kind: 'status_mismatch',
    applies: `has_r and has_o and ((r_status = 'cancelled' and not closed) or (r_status = 'paid' and o_status = 'cancelled'))`,
    reason: "case when r_status = 'paid' then 'cancelled_here' end",
    stake: `case when r_status = 'cancelled' then o_amount_krw - o_refunded_krw
             else ${krwAt('r_amount - r_refunded', 'o_currency', 'o_fx_rate')} end`,
    bps: 'case when o_creator_id is not null then coalesce(o_bps, :default_bps) end',
  },
  {
    ord: 7,
    kind: 'attribution_mismatch',
    applies: `has_r and has_o and (r_coupon_code is not null or r_click_ref is not null)
          and (o_creator_id is null or (row_creator is not null and row_creator <> o_creator_id))`,
    reason: `case when paid_out then 'paid_out' when closed then 'closed'
             when row_creator is null then
               case when click_creator is not null and not channel_allows then 'other_channel_last_touch'
                    when click_creator is not null then 'click_outside_window'
                    when r_click_ref is not null and (r_coupon_code is null or code_creator is null) then 'unknown_click_ref'
                    else 'unknown_coupon_code' end
             when (row_via = 'code' and upper(trim(o_coupon_code)) is not distinct from upper(trim(r_coupon_code)))
               or (row_via = 'click' and o_click_ref is not distinct from r_click_ref) then 'already_received'
             when ${tooOld('o_occurred_at')} then 'too_old_to_resend' end`,
    stake: 'o_amount_krw',
    bps: `case when row_creator is not null then coalesce(row_bps, :default_bps)
             when o_creator_id is not null then coalesce(o_bps, :default_bps) end`,
  },
];

/** Our side of one order as the comparison reads it, by name (`o` the orders row). */
const ours: [string, string][] = [
  ['o_id', 'o.id'],
  ['o_order_id', 'o.order_id'],
  ['o_status', 'o.status'],
  ['o_amount_krw', 'o.amount'],
  ['o_currency', "coalesce(o.original_currency, 'KRW')"],
  ['o_amount', 'coalesce(o.original_amount, o.amount)'],
  ['o_refunded', 'o.refunded_original_amount'],
  ['o_refunded_krw', 'o.refunded_amount'],
  ['o_fx_rate', 'o.fx_rate'],
  ['o_creator_id', 'o.creator_id'],
  ['o_bps', 'o.commission_bps'],
  ['o_coupon_code', 'o.coupon_code'],
  ['o_click_ref', 'o.click_ref'],
  ['o_last_touch', 'o.last_touch_channel'],
  ['o_occurred_at', 'o.occurred_at'],
];
const ourColumns = ours.map(([name, value]) => `${value} as ${name}`).join(', ');

/** A row's differences are numbered `line * SEQ_PER_LINE + ord`: in line order, then by kind. */
const SEQ_PER_LINE = 8;

/**
 * Ours the upload lacks are numbered from here: past every line's (a CSV of at most 100 MB has
 * fewer than 2^27 lines), with room for 2^30 of them in seq's integer.
 */
const SEQ_UNPAIRED = 2 ** 30;

/**
 * One slice of the comparison, one statement. `ours`: at most `:slice` of our orders in the period
 * after (`:after_at`, `:after_id`) in the list index's order, each paired with its staged row,
 * which is deleted as it pairs (an order without one is missing_there). `rows`: then the rows
 * still staged (their order is not in the period, or not ours), at most `:slice` after
 * `:after_order` in order_id's order, deleted as they are read, each paired with its order
 * elsewhere by the lookup key. Then, as one pass for either: what each row's code or click
 * resolves to now (the attribution module's tables, as ingestion reads them); for the pairs that
 * can differ, one row per difference written; and the slice's figures returned. Nothing is materialized but the slice's pairs that can differ.
 */
export function comparison(citus: boolean, part: 'rows' | 'ours' = 'rows'): string {
  // Staged order ids compare bytewise (collation "C", Migration20261208000000), ours in the
  // default collation: each statement that meets the two names the one its index is in.
  const ourMatch = citus
    ? 'o.brand_id = :brand_id and o.livemode = :livemode and o.order_id = r.order_id collate "default"'
    : `${orderLookupKeySql('o')} = (:brand_id::text || '/' || :mode::text || '/' || r.order_id collate "default") and o.brand_id = :brand_id`;
  const rowColumns = `r.line, r.order_id collate "default" as r_order_id, r.status as r_status, r.amount as r_amount,
         r.currency as r_currency, r.fx_rate as r_fx_rate, r.refunded_amount as r_refunded,
         r.occurred_at as r_occurred_at, r.coupon_code as r_coupon_code, r.click_ref as r_click_ref,
         r.customer_hash as r_customer_hash, r.parent_order_id as r_parent_order_id`;
  // The slice's staged rows go once compared. By their ctids alone (a tid scan), where planning
  // with stale statistics could have chosen the brand's staged rows' index instead. Citus plans no
  // statement with a second modification beside the differences' insert: there the slice returns
  // the order ids it paired, deleted by the next statement (`takeStaged`).
  const staged = citus ? 'order_id' : 'ctid';
  const taken = citus
    ? ''
    : `taken as (
  delete from reconciliation_rows
   where ctid = any (array(select staged from pair where staged is not null))
     and reconciliation_id = :reconciliation_id
),`;
  const source =
    part === 'rows'
      ? `slice as (
  select ${staged} as staged, * from reconciliation_rows
   where brand_id = :brand_id and reconciliation_id = :reconciliation_id and order_id > :after_order::text
   order by order_id limit :slice
),
pair as (
  select ${rowColumns}, r.staged, x.*, false as in_period
    from slice r
    -- Not flattened (limit): one probe of the lookup key per row.
    left join lateral (
      select ${ourColumns} from orders o where ${ourMatch} and o.livemode = :livemode limit 1
    ) x on true
),
${taken}`
      : `slice as (
  select ${ourColumns} from orders o
   where o.brand_id = :brand_id and o.livemode = :livemode and o.occurred_at >= :from and o.occurred_at < :to
     and (o.occurred_at, o.id) > (:after_at::timestamptz, :after_id::text)
   order by o.occurred_at, o.id limit :slice
),
-- Each order's staged row by the unique key: one probe per order, not flattened (limit), whatever
-- the statistics of rows staged moments ago say (joined, they were hashed or scanned whole).
pair as (
  select ${rowColumns}, r.staged, s.*, true as in_period
    from slice s
    left join lateral (
      select r.${staged} as staged, r.* from reconciliation_rows r
       where r.brand_id = :brand_id and r.reconciliation_id = :reconciliation_id and r.order_id = s.o_order_id collate "C"
       limit 1
    ) r on true
),
-- Those rows go as they pair: what stays staged pairs with no order of the period.
${taken}`;
  // A row's differences by its line; ours the upload lacks after every line's, in the list's order.
  const seq =
    part === 'rows'
      ? `line * ${SEQ_PER_LINE} + ord`
      : `case when line is null then :seq_from::int + row_number() over (order by line is not null, o_occurred_at, o_id)
              else line * ${SEQ_PER_LINE} + ord end`;
  // Read from the pairs (one a slice's row), which are kept for the deletion anyway: the slice,
  // read once, is not kept as well.
  const progress =
    part === 'rows'
      ? `(select count(*)::int from pair) as scanned,
  (select r_order_id collate "C" from pair order by 1 desc limit 1) as last_order`
      : `(select count(*)::int from pair) as scanned,
  (select o_occurred_at::text from pair order by o_occurred_at desc, o_id desc limit 1) as last_at,
  (select o_id from pair order by o_occurred_at desc, o_id desc limit 1) as last_id,
  (select count(*)::int from written where kind = 'missing_there') as written`;
  return `
with ${source}
attributed as (
  -- Each by its unique key, not flattened (limit): a probe per pair whatever the plan's estimates (the
  -- stored statement's generic plan is one for every brand, whose codes and clicks number apart).
  select p.*, rc.creator_id as code_creator, rc.bps as code_bps, rk.creator_id as click_creator,
         rk.bps as click_bps, rk.in_window,
         (p.o_last_touch is null or lower(p.o_last_touch) = 'lf') as channel_allows
    from pair p
    left join lateral (
      select c.creator_id, f.commission_bps as bps from coupon_codes c
        left join offers f on f.brand_id = c.brand_id and f.id = c.offer_id
       where c.brand_id = :brand_id and c.code_key = upper(trim(p.r_coupon_code)) limit 1) rc on p.r_coupon_code is not null
    left join lateral (
      select k.creator_id, f.commission_bps as bps,
             (coalesce(p.o_occurred_at, p.r_occurred_at, :now::timestamptz) - k.clicked_at
               between make_interval(secs => -(:skew_seconds)::float8) and make_interval(days => f.attribution_window_days)) as in_window
        from clicks k join offers f on f.brand_id = k.brand_id and f.id = k.offer_id
       where k.brand_id = :brand_id and k.id = p.r_click_ref limit 1) rk on p.r_click_ref is not null
),
f as (
  select p.*,
         r_order_id is not null as has_r, o_id is not null as has_o,
         o_status = 'paid_out' as paid_out, o_status in ('refunded', 'cancelled') as closed,
         coalesce(code_creator, case when in_window and channel_allows then click_creator end) as row_creator,
         case when code_creator is not null then 'code' when in_window and channel_allows then 'click' end as row_via,
         case when code_creator is not null then code_bps when in_window and channel_allows then click_bps end as row_bps
    from attributed p
),
g as (
  select f.*,
         (has_r and has_o and r_currency = o_currency and r_amount <> o_amount) as amount_differs,
         (has_r and has_o and r_currency = o_currency and r_amount <> o_amount
           and not paid_out and not closed and r_amount >= o_refunded and not ${tooOld('o_occurred_at')}) as amount_fixed,
         -- What any kind below needs: a pair equal in all these has no difference.
         (not (has_r and has_o) or r_currency <> o_currency or r_amount <> o_amount or r_refunded <> o_refunded
           or r_status = 'cancelled' or o_status = 'cancelled' or r_coupon_code is not null
           or r_click_ref is not null) as may_differ
    from f
),
-- Only the pairs that can differ, each kind's reason and stake computed only where it applies.
gd as materialized (select * from g where may_differ),
d as (
  ${kinds
    .map(
      (k) =>
        `select gd.*, ${k.ord} as ord, '${k.kind}'::text as kind, (${k.reason})::text as reason,
         coalesce((${k.stake})::bigint, 0) as stake, (${k.bps})::int as creator_bps
    from gd where ${k.applies}`,
    )
    .join('\n  union all\n  ')}
),
written as (
  insert into reconciliation_differences (brand_id, reconciliation_id, seq, kind, order_id, brand, ours, refusal,
      fixable, reason, amount_at_stake, commission_at_stake, fix_at)
  select :brand_id, :reconciliation_id, ${seq},
         kind, coalesce(r_order_id, o_order_id),
         case when has_r then jsonb_strip_nulls(jsonb_build_object('order_id', r_order_id, 'status', r_status,
           'amount', r_amount, 'currency', r_currency, 'fx_rate', r_fx_rate::text, 'refunded_amount', r_refunded,
           'occurred_at', to_char(r_occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
           'coupon_code', r_coupon_code, 'click_ref', r_click_ref, 'customer_hash', r_customer_hash,
           'parent_order_id', r_parent_order_id)) end,
         case when has_o then jsonb_build_object('order_id', o_order_id, 'status', o_status, 'amount', o_amount,
           'refunded_amount', o_refunded, 'currency', o_currency, 'attributed', o_creator_id is not null,
           'creator_id', o_creator_id, 'paid_out', paid_out) end,
         case when kind = 'missing_here' then (
           select x.code from ingestion_failures x
            where x.brand_id = :brand_id and x.livemode = :livemode and x.order_id = r_order_id
              and x.event_type = 'order.paid' and x.failed_at > :now::timestamptz - interval '7 days'
            order by x.failed_at desc limit 1) end,
         reason is null, reason, stake,
         case when creator_bps is null then 0 else floor(stake * creator_bps / 10000.0)::bigint end,
         -- The date of the order.paid the fix sends: past api-v1's 90 days, no longer sendable.
         case when reason is null then
           case kind when 'missing_here' then r_occurred_at
                     when 'amount_mismatch' then o_occurred_at when 'attribution_mismatch' then o_occurred_at end end
    from d
  returning kind, fixable, amount_at_stake, commission_at_stake, order_id, fix_at
)
select
  ${progress},
  (select count(*)::int from d where kind = 'missing_here') as unpaired,
  (select count(distinct line)::int from d where has_o and has_r) as paired_differing,
  (select coalesce(jsonb_object_agg(kind, n), '{}') from (select kind, count(*)::int as n from written group by kind) c) as differences,
  (select count(*)::int from written where fixable) as fixable,
  (select coalesce(sum(amount_at_stake), 0)::bigint from written) as at_stake_amount,
  (select coalesce(sum(commission_at_stake), 0)::bigint from written) as at_stake_commission,
  (select (extract(epoch from min(fix_at)) * 1000000)::bigint::text from written where fixable) as first_fix_at${
    citus
      ? ",\n  (select coalesce(array_agg(staged), '{}') from pair where staged is not null) as paired"
      : ''
  }`;
}

/** Each named value's type, as a stored statement's parameter (what PostgreSQL inferred for the plain statement). */
const VALUE_TYPES: Record<string, string> = {
  brand_id: 'varchar',
  reconciliation_id: 'varchar',
  livemode: 'boolean',
  mode: 'text',
  from: 'timestamptz',
  to: 'timestamptz',
  now: 'timestamptz',
  skew_seconds: 'float8',
  default_bps: 'int',
  slice: 'int',
  after_at: 'text',
  after_id: 'text',
  after_order: 'text',
  seq_from: 'int',
};

/** The figures' columns, as a stored statement returns them. */
const figureColumns = `unpaired int, paired_differing int, differences jsonb, fixable int, at_stake_amount bigint,
  at_stake_commission bigint, first_fix_at text`;

/** A slice's statement on one PostgreSQL kept planned, and its text with `?` placeholders. */
function storedComparison(part: 'rows' | 'ours'): { query: HotQuery; text: string } {
  const typed = comparison(false, part).replace(/:([a-z_]+)\b(?!::)/g, (whole, name: string) =>
    VALUE_TYPES[name] ? `${whole}::${VALUE_TYPES[name]}` : whole,
  );
  const [text] = named(typed, Object.fromEntries(Object.keys(VALUE_TYPES).map((name) => [name, null])));
  const progress =
    part === 'rows'
      ? 'scanned int, last_order varchar'
      : 'scanned int, last_at text, last_id varchar, written int';
  return { query: hotQuery(text, `${progress}, ${figureColumns}`), text: typed };
}

/**
 * On one PostgreSQL each slice's statement is a stored one (db/fast-path/stored-statements.ts):
 * PL/pgSQL keeps its plan in the backend, generic after a few slices, where the plain statement
 * was planned anew for each slice (docs/benchmarks.md, "Profile notes"). On Citus the plain
 * statement, which the coordinator routes to the brand's worker.
 */
export const comparisonStatements = { ours: storedComparison('ours'), rows: storedComparison('rows') };

/** One slice of `part` with `values` by name: the stored statement here, the plain one on Citus. */
async function compareSlice(
  sql: Sql,
  citus: boolean,
  part: 'rows' | 'ours',
  values: Record<string, unknown>,
): Promise<SliceFigures> {
  if (citus) {
    const [text, ordered] = named(comparison(true, part), values);
    const [slice] = await sql.query<SliceFigures>(text, ordered);
    return slice!;
  }
  const stored = comparisonStatements[part];
  const [, ordered] = named(stored.text, values);
  if (ordered.length !== stored.query.stored.types.length)
    throw new Error(`comparison ${part}: a value is missing`);
  const [slice] = await stored.query.run<SliceFigures>(sql, ordered);
  return slice!;
}

/** What one slice returns. */
interface SliceFigures {
  scanned: number;
  last_order?: string | null;
  last_at?: string | null;
  last_id?: string | null;
  written?: number;
  unpaired: number;
  paired_differing: number;
  differences: Partial<Record<DifferenceKind, number>>;
  fixable: number;
  at_stake_amount: string;
  at_stake_commission: string;
  /** Microseconds since the epoch, as text (exact), of the slice's first fixable fix_at. */
  first_fix_at: string | null;
  /** On Citus, the order ids of the staged rows the slice compared, for `takeStaged`. */
  paired?: string[];
}

/** On Citus, the staged rows a slice compared go by a statement of their own (see `comparison`). */
async function takeStaged(sql: Sql, brandId: string, reconciliationId: string, slice: SliceFigures) {
  if (!slice.paired?.length) return;
  await sql.query(
    'delete from reconciliation_rows where brand_id = ? and reconciliation_id = ? and order_id = any(?::text[])',
    [brandId, reconciliationId, slice.paired],
  );
}

/** The figures of the whole comparison, added up slice by slice. */
class Figures {
  orders = 0;
  unpaired = 0;
  pairedDiffering = 0;
  readonly differences: Record<string, number> = {};
  fixable = 0;
  atStakeAmount = 0n;
  atStakeCommission = 0n;
  firstFixAt: bigint | undefined;

  add(slice: SliceFigures): void {
    this.unpaired += slice.unpaired;
    this.pairedDiffering += slice.paired_differing;
    for (const [kind, n] of Object.entries(slice.differences))
      this.differences[kind] = (this.differences[kind] ?? 0) + (n ?? 0);
    this.fixable += slice.fixable;
    this.atStakeAmount += BigInt(slice.at_stake_amount);
    this.atStakeCommission += BigInt(slice.at_stake_commission);
    if (slice.first_fix_at !== null) {
      const at = BigInt(slice.first_fix_at);
      if (this.firstFixAt === undefined || at < this.firstFixAt) this.firstFixAt = at;
    }
  }
}

/**
 * The comparison plans with sequential scans off, as the engine's statements do: each step is an
 * index probe or range whatever the statistics of freshly staged rows say, never a scan of every
 * brand's orders (test/integration/reconciliations.test.ts checks the plan). Without JIT: the
 * statement's size makes its estimated cost cross the JIT thresholds, and compiling it cost more
 * than running it (docs/benchmarks.md, "Reconciliation at scale"). Without parallel workers: a
 * nightly comparison may take longer but takes one core of the database, never the cores that
 * live events are written with (docs/decisions.md).
 */
export const COMPARISON_SETTINGS = {
  enable_seqscan: 'off',
  jit: 'off',
  max_parallel_workers_per_gather: '0',
} as const;

/**
 * The settings a comparison's transaction runs with. On Citus the brand's worker plans each slice,
 * so they are sent on to it (`citus.propagate_set_commands`): with statistics of rows staged
 * moments ago a worker would otherwise read the rows left staged by a scan of its shard and a sort.
 */
export function comparisonSettings(citus: boolean): TransactionSettings {
  return citus ? { 'citus.propagate_set_commands': 'local', ...COMPARISON_SETTINGS } : COMPARISON_SETTINGS;
}

/**
 * Staged rows, or our orders, per statement: each statement's start-up is a fixed cost that a
 * smaller slice pays more often (docs/benchmarks.md). At the bench's row widths a slice's pairs
 * stay within the default work_mem (checked with log_temp_files: docs/benchmarks.md); rows with
 * values near their columns' limits could spill, which costs a little I/O, never a result. The
 * pace, not the slice, keeps the comparison's share of the database small.
 */
export const COMPARE_SLICE = 4000;

/** Waits between slices so that the work done keeps to `perSecond` since `started` (0: no wait). */
async function keepPace(started: number, done: number, perSecond: number): Promise<void> {
  if (!(perSecond > 0)) return;
  const wait = started + (done / perSecond) * 1000 - performance.now();
  if (wait > 0) await sleep(wait);
}

/**
 * Compares a `processing` reconciliation and completes it, in one transaction: its row is locked
 * first, so two runs (the job and its lost-work copy) compare once; a completed or deleted one is
 * left alone; a failure rolls every slice back. Our orders in the period are read first, a slice
 * at a time in the list index's order, each with its staged row, which goes once compared (each
 * difference keeps its row's values); then the rows left staged, a slice of lines at a time.
 * Returns what it did: `completed` now, `not_processing` (completed or failed before, or deleted),
 * or `staging_lost`: the upload's rows are gone (the staging table is unlogged on a single node
 * and a crash empties it), so comparing would report every order as missing: it fails instead.
 */
/**
 * Statistics of the staged rows before a comparison of more than one slice: the upload committed
 * moments ago and autovacuum analyzes within minutes, while the slices' plans (the rows left by
 * line, their deletion) are chosen by the row counts PostgreSQL believes. Outside the comparison's
 * transaction, which would otherwise hold ANALYZE's lock to its end. Best effort: a role that may
 * not analyze the table compares with the statistics there are.
 */
async function analyzeStaged(pool: pg.Pool, brandId: string, reconciliationId: string, slice: number) {
  try {
    const { rows } = await pool.query<{ rows: number; believed: number }>(
      `select r.rows, c.reltuples as believed from reconciliations r, pg_class c
        where r.brand_id = $1 and r.id = $2 and c.oid = 'reconciliation_rows'::regclass`,
      [brandId, reconciliationId],
    );
    const staged = rows[0];
    // The plans need the row count, not the values' distribution: a sample of 3,000 rows (a
    // tenth of the default) is a tenth of the burst beside live events.
    if (staged && staged.rows > slice && staged.believed < staged.rows)
      await inTransactionOn(pool, (sql) => sql.query('analyze reconciliation_rows'), {
        default_statistics_target: '10',
      });
  } catch {
    // The comparison is correct without it, only slower.
  }
}

export async function completeReconciliation(
  orm: MikroORM,
  brandId: string,
  reconciliationId: string,
  now = new Date(),
  { perSecond = 0, slice: sliceSize = COMPARE_SLICE }: { perSecond?: number; slice?: number } = {},
): Promise<ComparisonOutcome> {
  const citus = await onCitus(orm);
  const pool = (await orm.em.getConnection().getNativeClient()) as pg.Pool;
  await analyzeStaged(pool, brandId, reconciliationId, sliceSize);
  return inTransactionOn(
    pool,
    async (sql) => {
      const [recon] = await sql.query<{
        livemode: boolean;
        period_from: Date;
        period_to: Date;
        status: string;
        request_id: string;
        rows: number;
        default_bps: number;
      }>(
        `select r.livemode, r.period_from, r.period_to, r.status, r.request_id, r.rows,
                b.default_commission_bps as default_bps
         from reconciliations r join brands b on b.id = r.brand_id
        where r.brand_id = ? and r.id = ? for update of r`,
        [brandId, reconciliationId],
      );
      if (recon?.status !== 'processing') return 'not_processing';
      // A crash empties the whole staging table, never part of one upload's rows (and the
      // comparison's deletions roll back with it), so one row tells whether they are all there.
      if (recon.rows > 0) {
        const [staged] = await sql.query<{ present: boolean }>(
          `select exists (select 1 from reconciliation_rows where brand_id = ? and reconciliation_id = ?) as present`,
          [brandId, reconciliationId],
        );
        if (!staged?.present) {
          await markFailed(sql, brandId, reconciliationId);
          return 'staging_lost';
        }
      }
      const common = {
        brand_id: brandId,
        reconciliation_id: reconciliationId,
        livemode: recon.livemode,
        mode: recon.livemode ? 'live' : 'test',
        from: recon.period_from,
        to: recon.period_to,
        now,
        skew_seconds: CLICK_SKEW_MS / 1000,
        default_bps: recon.default_bps,
        slice: sliceSize,
      };
      const figures = new Figures();
      // Ours the upload lacks are numbered after every line's differences.
      let seqFrom = SEQ_UNPAIRED;
      let after = { at: '-infinity', id: '' };
      // The pace counts our orders read, then the rows left staged.
      const started = performance.now();
      let done = 0;
      for (;;) {
        const slice = await compareSlice(sql, citus, 'ours', {
          ...common,
          after_at: after.at,
          after_id: after.id,
          seq_from: seqFrom,
        });
        await takeStaged(sql, brandId, reconciliationId, slice);
        figures.add(slice);
        figures.orders += slice.scanned;
        done += slice.scanned;
        seqFrom += slice.written ?? 0;
        if (slice.scanned < sliceSize) break;
        after = { at: slice.last_at!, id: slice.last_id! };
        await keepPace(started, done, perSecond);
      }
      let afterOrder = '';
      for (;;) {
        const slice = await compareSlice(sql, citus, 'rows', { ...common, after_order: afterOrder });
        await takeStaged(sql, brandId, reconciliationId, slice);
        if (slice.scanned === 0) break;
        figures.add(slice);
        afterOrder = slice.last_order!;
        done += slice.scanned;
        if (slice.scanned < sliceSize) break;
        await keepPace(started, done, perSecond);
      }
      await finish(sql, brandId, reconciliationId, recon, figures, now);
      return 'completed';
    },
    comparisonSettings(citus),
  );
}

async function finish(
  sql: Sql,
  brandId: string,
  reconciliationId: string,
  recon: { livemode: boolean; request_id: string; rows: number },
  figures: Figures,
  now: Date,
): Promise<void> {
  const differences = Object.fromEntries(differenceKinds.map((k) => [k, figures.differences[k] ?? 0]));
  const [row] = await sql.query<ReconciliationRow>(
    `update reconciliations set status = ?, orders = ?, matched = ?, differences = ?::jsonb, fixable = ?,
            at_stake_amount = ?, at_stake_commission = ?, as_of = ?, completed_at = ?,
            fixable_until = timestamptz 'epoch' + ?::bigint * interval '1 microsecond' + interval '90 days'
      where brand_id = ? and id = ?
      returning *`,
    [
      'completed',
      figures.orders,
      recon.rows - figures.unpaired - figures.pairedDiffering,
      JSON.stringify(differences),
      figures.fixable,
      figures.atStakeAmount.toString(),
      figures.atStakeCommission.toString(),
      now,
      new Date(),
      figures.firstFixAt?.toString() ?? null,
      brandId,
      reconciliationId,
    ],
  );
  await recordWebhookEvents(sql, [
    {
      brandId,
      livemode: recon.livemode,
      type: 'reconciliation.completed',
      requestId: recon.request_id,
      data: { object: toReconciliationOut(row!) },
      dedupKey: `reconciliation.completed:${reconciliationId}`,
    },
  ]);
}

export type ComparisonOutcome = 'completed' | 'not_processing' | 'staging_lost';

/** Fails a `processing` reconciliation; its staged rows go with it (nothing else would compare them). */
async function markFailed(sql: Sql, brandId: string, reconciliationId: string): Promise<void> {
  await sql.query(
    `update reconciliations set status = ?, completed_at = now() where brand_id = ? and id = ? and status = 'processing'`,
    ['failed', brandId, reconciliationId],
  );
  await sql.query('delete from reconciliation_rows where brand_id = ? and reconciliation_id = ?', [
    brandId,
    reconciliationId,
  ]);
}

/** Marks a reconciliation whose comparison cannot succeed (its job's last attempt failed). */
export async function failReconciliation(orm: MikroORM, brandId: string, reconciliationId: string) {
  await inTransaction(orm, (sql) => markFailed(sql, brandId, reconciliationId));
}
