import { brandTable, recordset, type Sql, type WritePart } from '../../db/fast-path/index.js';
import { isoTime } from '../../shared/iso-time.js';
import { traceAttribution } from '../attribution/resolve.js';
import { compileRules } from '../programs/commission.js';
import { canonicalRules, type ProgramRules } from '../programs/programs.schemas.js';
import { BRAND, brandStatement, type LoadedProgramRows, type LoadedVersion, withBrand } from './load-book.js';
import type { OrderBook } from './order-book.js';
import { rememberOutline, tierChanges } from './program-outline.js';
import {
  type AttributionTrace,
  MonthLedger,
  type MonthRow,
  monthStartAt,
  type PricingVersion,
  type ProgramBook,
  type TierChange,
} from './program-state.js';
import type { ValidEvent } from './valid-event.js';

// Published versions are immutable: compiled once per process, by id.
const compiled = new Map<string, Omit<PricingVersion, 'effectiveFrom'>>();
const MAX_COMPILED = 10_000;

async function compileMissing(sql: Sql, loaded: readonly LoadedVersion[]): Promise<void> {
  const missing = Map.groupBy(
    loaded.filter((v) => !compiled.has(v.id)),
    (v) => v.brand_id,
  );
  for (const [brandId, versions] of missing) {
    const rows = await sql.query<{ id: string; time_zone: string; rules: ProgramRules }>(
      `select id, time_zone, rules from commission_program_versions
        where brand_id = ? and status = 'published' and id in (select jsonb_array_elements_text(?::jsonb))`,
      [brandId, JSON.stringify(versions.map((v) => v.id))],
    );
    if (compiled.size + rows.length > MAX_COMPILED) compiled.clear();
    for (const row of rows) {
      const rules = canonicalRules(row.rules);
      compiled.set(row.id, {
        id: row.id,
        timeZone: row.time_zone,
        program: compileRules(rules),
        hasTiers: (rules.tiers?.levels.length ?? 0) > 0,
      });
    }
  }
}

/** A brand's published versions as pricing uses them, and what the program book derives from them. */
interface BrandVersions {
  /** In effective order, as loaded. */
  versions: readonly PricingVersion[];
  byId: ReadonlyMap<string, PricingVersion>;
  /** The zones of the versions with a monthly cap. */
  zones: readonly string[];
  tiered: boolean;
}

// By the brand's loaded versions (ids and effective instants): published versions never change, so
// a brand's set is built once, not for every group (a single request's group is one event).
const brandVersions = new Map<string, BrandVersions>();
const MAX_BRAND_VERSIONS = 10_000;

function brandVersionsOf(loaded: readonly LoadedVersion[]): BrandVersions | undefined {
  let key = '';
  for (const v of loaded) key += `${v.id}\u0000${v.effective_from}\u0000`;
  const known = brandVersions.get(key);
  if (known) return known;
  const versions: PricingVersion[] = [];
  for (const v of loaded) {
    const c = compiled.get(v.id);
    if (c) versions.push({ ...c, effectiveFrom: new Date(v.effective_from).getTime() });
  }
  if (versions.length === 0) return undefined;
  const set: BrandVersions = {
    versions,
    byId: new Map(versions.map((v) => [v.id, v])),
    zones: [...new Set(versions.filter((v) => v.program.perCreatorMonthCap !== null).map((v) => v.timeZone))],
    tiered: versions.some((v) => v.hasTiers),
  };
  // Kept only when every version was compiled: one missing is read again by the next group.
  if (versions.length === loaded.length) {
    if (brandVersions.size >= MAX_BRAND_VERSIONS) brandVersions.clear();
    brandVersions.set(key, set);
  }
  return set;
}

/**
 * Every creator an order's events can price it for, and every instant they can price it at.
 * Arrays made at their first value (an order has one of each but for a resend in the same group):
 * an empty array literal grows to room for 17 on its first push.
 */
interface OrderReach {
  creators: string[] | null;
  /** order.paid instants (tiers are read at them). */
  paidAt: number[] | null;
  /** Every instant the order's month is counted at: its own as loaded, and each order.paid's. */
  at: number[] | null;
}

/** What a book's events can reach: tier instants per creator, and the creator-months to lock. */
interface BookWants {
  /** Per creator, the earliest and latest order.paid instant. */
  tiers: Map<string, { from: number; to: number }> | null;
  /** Per zone, `creator\0month` → the creator-month's row. */
  months: { zone: string; rows: Map<string, MonthRow>; lastCreator: string; lastMonth: string }[];
}

function wantTier(wants: BookWants, creatorId: string, at: number): void {
  const want = wants.tiers!.get(creatorId);
  if (!want) wants.tiers!.set(creatorId, { from: at, to: at });
  else if (at < want.from) want.from = at;
  else if (at > want.to) want.to = at;
}

// Indexed loops in these helpers, run for every event: a for…of over an array goes through the
// iterator protocol until the optimizing compiler takes the function.
function wantMonth(book: OrderBook, wants: BookWants, creatorId: string, at: number): void {
  const zones = wants.months;
  for (let z = 0; z < zones.length; z++) {
    const zone = zones[z]!;
    const month = monthStartAt(at, zone.zone);
    // Most of a group's orders share creator and month (monthStartAt gives the same string for the
    // same quarter hour): two compares instead of building and hashing a key.
    if (zone.lastCreator === creatorId && zone.lastMonth === month) continue;
    zone.lastCreator = creatorId;
    zone.lastMonth = month;
    const key = `${creatorId}\u0000${month}`;
    if (!zone.rows.has(key))
      zone.rows.set(key, {
        brand_id: book.scope.brandId,
        livemode: book.scope.livemode,
        creator_id: creatorId,
        time_zone: zone.zone,
        month_start: month,
      });
  }
}

/** A creator an order reaches, paired with every instant it already has (and each later one). */
function addCreator(book: OrderBook, wants: BookWants, r: OrderReach, creatorId: string): void {
  if (r.creators === null) r.creators = [creatorId];
  else if (r.creators.includes(creatorId)) return;
  else r.creators.push(creatorId);
  const paidAt = wants.tiers ? r.paidAt : null;
  if (paidAt) for (let i = 0; i < paidAt.length; i++) wantTier(wants, creatorId, paidAt[i]!);
  const instants = r.at;
  if (instants) for (let i = 0; i < instants.length; i++) wantMonth(book, wants, creatorId, instants[i]!);
}

function addInstant(book: OrderBook, wants: BookWants, r: OrderReach, at: number, paid: boolean): void {
  if (paid && wants.tiers && !r.paidAt?.includes(at)) {
    if (r.paidAt === null) r.paidAt = [at];
    else r.paidAt.push(at);
    const creators = r.creators;
    if (creators) for (let i = 0; i < creators.length; i++) wantTier(wants, creators[i]!, at);
  }
  if (r.at === null) r.at = [at];
  else if (r.at.includes(at)) return;
  else r.at.push(at);
  const creators = r.creators;
  if (creators) for (let i = 0; i < creators.length; i++) wantMonth(book, wants, creators[i]!, at);
}

/**
 * The creators and instants the group's events can reach, found before planning with the same
 * attribution trace the planner runs (pure; kept for the planner, which takes it instead of
 * tracing again), so the rows planning reads are locked beforehand, in key order, by one
 * statement: the order's creator as loaded, the creator a code or click attributes to, a
 * renewal's parent's creator. Each creator an order reaches is wanted at each of its instants.
 */
function reachOf(
  book: OrderBook,
  events: Iterable<ValidEvent>,
  wants: BookWants,
  traces: Map<ValidEvent, AttributionTrace>,
): void {
  const reach = new Map<string, OrderReach>();
  for (const event of events) {
    if (event.type !== 'order.paid' && event.type !== 'refund.created' && event.type !== 'order.cancelled')
      continue;
    const orderId = event.data.orderId;
    let r = reach.get(orderId);
    if (!r) {
      r = { creators: null, paidAt: null, at: null };
      reach.set(orderId, r);
      const existing = book.orders.get(orderId);
      if (existing) addInstant(book, wants, r, existing.occurredAt.getTime(), false);
      if (existing?.creatorId) addCreator(book, wants, r, existing.creatorId);
    }
    if (event.type !== 'order.paid') continue;
    const d = event.data;
    const traced = traceAttribution(book.catalog, {
      couponCode: d.couponCode,
      clickRef: d.clickRef,
      lastTouchChannel: d.lastTouchChannel,
      occurredAt: event.occurredAt,
    });
    traces.set(event, traced);
    if (traced.attribution) addCreator(book, wants, r, traced.attribution.creatorId);
    if (d.parentOrderId) {
      const parent = book.orders.get(d.parentOrderId);
      if (parent?.creatorId) addCreator(book, wants, r, parent.creatorId);
      // A parent first paid earlier in the group: whoever its events can reach.
      const parentReach = reach.get(d.parentOrderId);
      if (parentReach?.creators && parentReach !== r)
        for (const c of parentReach.creators) addCreator(book, wants, r, c);
    }
    addInstant(book, wants, r, event.occurredAt.getTime(), true);
  }
}

interface ProgramRows {
  tiers: { brand_id: string; creator_id: string; at: string; level: string | null }[];
  offers: { brand_id: string; id: string }[];
  months: (MonthRow & { net_commission: string | number })[];
}

/**
 * Per reached creator, the tier in force at the group's earliest instant and every change up to
 * its latest (usually none): two index probes a creator, whatever the number of its orders.
 */
const tierPart = (oneBrand: boolean) => {
  const b = oneBrand ? ` and t.brand_id = ${BRAND}` : '';
  return `
tiers as (
  select want.brand_id, want.creator_id, t.at, t.level
    from json_to_recordset(?::json) as want(brand_id text, creator_id text, from_at timestamptz, to_at timestamptz)
    ${tierChanges({ brand: 'want.brand_id', creator: 'want.creator_id', from: 'want.from_at', to: 'want.to_at' }, b)}
   order by want.brand_id, want.creator_id, t.part, t.at, t.id
)`;
};

const offerPart = (oneBrand: boolean) => `
offers as (
  select f.brand_id, f.id
    from json_to_recordset(?::json) as want(brand_id text, id text)
    cross join lateral (
      select f.brand_id, f.id from ${brandTable('offers')} f
       where f.brand_id = want.brand_id and f.id = want.id and f.commission_bps is not null${oneBrand ? ` and f.brand_id = ${BRAND}` : ''}
    ) f
)`;

const monthColumns = '(brand_id text, livemode boolean, creator_id text, time_zone text, month_start date)';

/**
 * The program's rows of a group in one round trip, after the load: the tiers in force at each
 * order.paid's instant for the creators it can reach, and each creator-month it can touch,
 * created at 0 when new and locked in key order (a no-op update: ON CONFLICT DO UPDATE locks and
 * returns the row's latest version, one a concurrent transaction committed after this statement's
 * snapshot included). A dry run reads them without a lock or a write.
 */
function programSql(lock: boolean, oneBrand: boolean): string {
  const brand = oneBrand ? BRAND : 'x.brand_id';
  const b = (alias: string) => (oneBrand ? ` and ${alias}.brand_id = ${BRAND}` : '');
  const months = lock
    ? `months as (
  insert into ${brandTable('creator_month_commissions')} as m (brand_id, livemode, creator_id, time_zone, month_start, net_commission)
  select ${brand}, x.livemode, x.creator_id, x.time_zone, x.month_start, 0
    from json_to_recordset(?::json) as x${monthColumns}
   order by x.livemode, x.creator_id, x.time_zone, x.month_start
  on conflict (brand_id, livemode, creator_id, time_zone, month_start) do update set net_commission = m.net_commission
  returning m.brand_id, m.livemode, m.creator_id, m.time_zone, m.month_start, m.net_commission
)`
    : `months as (
  select x.brand_id, x.livemode, x.creator_id, x.time_zone, x.month_start, coalesce(m.net_commission, 0) as net_commission
    from json_to_recordset(?::json) as x${monthColumns}
    left join lateral (
      select m.net_commission from ${brandTable('creator_month_commissions')} m
       where m.brand_id = x.brand_id and m.livemode = x.livemode and m.creator_id = x.creator_id
         and m.time_zone = x.time_zone and m.month_start = x.month_start${b('m')}
    ) m on true
)`;
  return `with ${tierPart(oneBrand)},${offerPart(oneBrand)},
${months}
select (select coalesce(json_agg(tiers), '[]') from tiers) as tiers,
       (select coalesce(json_agg(offers), '[]') from offers) as offers,
       (select coalesce(json_agg(months), '[]') from months) as months`;
}

const programShapes = [false, true].map((oneBrand) => ({
  lock: brandStatement(programSql(true, oneBrand), 'tiers json, offers json, months json', oneBrand),
  peek: brandStatement(programSql(false, oneBrand), 'tiers json, offers json, months json', oneBrand),
}));

const monthRecordset = recordset({
  brand_id: 'text',
  livemode: 'boolean',
  creator_id: 'text',
  time_zone: 'text',
  month_start: 'date',
  net_commission: 'bigint',
});

const monthUpsert = (brand: string) =>
  `insert into ${brandTable('creator_month_commissions')} as m (brand_id, livemode, creator_id, time_zone, month_start, net_commission)
            select ${brand}, x.livemode, x.creator_id, x.time_zone, x.month_start, x.net_commission
              from ${monthRecordset}
            on conflict (brand_id, livemode, creator_id, time_zone, month_start)
            do update set net_commission = m.net_commission + excluded.net_commission`;

/** The creator-months' write as a statement of its own, for a group whose write has no room for it. */
const monthsApart = [false, true].map((oneBrand) =>
  brandStatement(
    `with m as (${monthUpsert(oneBrand ? BRAND : 'x.brand_id')} returning 1) select count(*)::int as n from m`,
    'n int',
    oneBrand,
  ),
);

export const programStatements = [
  ...programShapes.flatMap((s) => [s.lock.query.stored, s.peek.query.stored]),
  ...monthsApart.map((s) => s.query.stored),
];

/** Writes a group's creator-month deltas ahead of its write (rows locked by this transaction). */
export async function writeMonthsApart(sql: Sql, rows: readonly object[], oneBrand?: string): Promise<void> {
  const statement = monthsApart[oneBrand === undefined ? 0 : 1]!;
  const values = [JSON.stringify(rows)];
  if (statement.oneBrand)
    await statement.query.run(sql, oneBrand!, withBrand(values, statement.brandAt, oneBrand));
  else await statement.query.run(sql, values);
}

/**
 * Gives each book of a group its brand's program (nothing for a brand without a published
 * version: no statement, no cost): versions from the load, compiled from the per-process cache,
 * the rows the load read with them (`preloaded`), and, when a version has tiers or a monthly cap
 * or a loaded order's offer is not one the group's codes and clicks name, whatever the load did
 * not cover, by one more statement for the group (above): a brand's first group in the process,
 * a refund or resend of an order paid in an earlier month. Returns whether it ran it.
 * A brand with a monthly cap keeps its creator-months for every order change, whatever the
 * order's pin: headroom counts every order of the month (docs/decisions.md).
 */
export async function loadPrograms(
  sql: Sql,
  books: Map<string, OrderBook>,
  loaded: readonly LoadedVersion[],
  eventsOf: (book: OrderBook) => Iterable<ValidEvent>,
  options: { lock: boolean; oneBrand?: string; preloaded?: LoadedProgramRows },
): Promise<boolean> {
  if (loaded.length === 0) return false;
  await compileMissing(sql, loaded);
  const loadedByBrand = new Map<string, LoadedVersion[]>();
  for (const v of loaded) {
    const list = loadedByBrand.get(v.brand_id);
    if (list) list.push(v);
    else loadedByBrand.set(v.brand_id, [v]);
  }
  const byBrand = new Map<string, BrandVersions>();
  for (const [brandId, list] of loadedByBrand) {
    const set = brandVersionsOf(list);
    if (!set) continue;
    byBrand.set(brandId, set);
    rememberOutline(brandId, { zones: set.zones, tiered: set.tiered });
  }
  // By brand and creator: a brand's live and test books share its tier rows (applied to both below).
  const tierWants = new Map<string, { brand_id: string; creator_id: string; from: number; to: number }>();
  const monthWants: MonthRow[] = [];
  const offerWants = new Map<string, { brand_id: string; id: string }>();
  const programs: {
    book: OrderBook;
    program: ProgramBook & { tiers: Map<string, TierChange[]>; ratedOffers: Set<string> };
  }[] = [];
  for (const book of books.values()) {
    const set = byBrand.get(book.scope.brandId);
    if (!set) continue;
    const { versions, zones, tiered } = set;
    const traces = tiered || zones.length > 0 ? new Map<ValidEvent, AttributionTrace>() : undefined;
    const program = {
      versions,
      byId: set.byId,
      tiers: new Map<string, TierChange[]>(),
      months: zones.length > 0 ? new MonthLedger(book.scope.brandId, book.scope.livemode, zones) : null,
      ratedOffers: new Set<string>(),
      ...(traces ? { traces } : {}),
    };
    book.program = program;
    programs.push({ book, program });
    // Whatever the versions' rules: without a default rate the offer's and the brand's steps give
    // an inheriting order the same figure, but its recorded source must still say which it was.
    // Offers the group's codes and clicks name come with their rate (an order the group itself
    // creates, then resends or renews, inherits from one of them); the loaded orders' others are read.
    const known = new Set<string>();
    for (const t of [...book.catalog.codes.values(), ...book.catalog.clicks.values()]) {
      if (!t.offerId) continue;
      known.add(t.offerId);
      if (t.commissionBps !== null) program.ratedOffers.add(t.offerId);
    }
    for (const o of book.orders.values())
      if (o.offerId && !known.has(o.offerId))
        offerWants.set(`${book.scope.brandId}\u0000${o.offerId}`, {
          brand_id: book.scope.brandId,
          id: o.offerId,
        });
    if (!traces) continue;
    const wants: BookWants = {
      tiers: tiered ? new Map() : null,
      months: zones.map((zone) => ({ zone, rows: new Map(), lastCreator: '', lastMonth: '' })),
    };
    reachOf(book, eventsOf(book), wants, traces);
    for (const [creatorId, { from, to }] of wants.tiers ?? []) {
      const key = `${book.scope.brandId}\u0000${creatorId}`;
      const want = tierWants.get(key);
      if (!want) tierWants.set(key, { brand_id: book.scope.brandId, creator_id: creatorId, from, to });
      else {
        want.from = Math.min(want.from, from);
        want.to = Math.max(want.to, to);
      }
    }
    for (const zone of wants.months) for (const row of zone.rows.values()) monthWants.push(row);
  }
  const byScope = new Map(
    programs.map(({ book, program }) => [`${book.scope.brandId}/${book.scope.livemode}`, program]),
  );
  const preloaded = options.preloaded;
  if (preloaded) {
    applyProgramRows(byScope, preloaded);
    leaveUncovered(preloaded, tierWants, monthWants, offerWants);
  }
  if (tierWants.size === 0 && monthWants.length === 0 && offerWants.size === 0) {
    if (preloaded) sortTiers(programs);
    return false;
  }
  const shape = programShapes[options.oneBrand === undefined ? 0 : 1]!;
  const statement = options.lock ? shape.lock : shape.peek;
  const values = [
    JSON.stringify(
      [...tierWants.values()].map((w) => ({
        brand_id: w.brand_id,
        creator_id: w.creator_id,
        // isoTime: the same text without V8's printf (the order's own instant, mostly just written).
        from_at: isoTime(w.from),
        to_at: isoTime(w.to),
      })),
    ),
    JSON.stringify([...offerWants.values()]),
    JSON.stringify(monthWants),
  ];
  const [row] = statement.oneBrand
    ? await statement.query.run<ProgramRows>(
        sql,
        options.oneBrand!,
        withBrand(values, statement.brandAt, options.oneBrand),
      )
    : await statement.query.run<ProgramRows>(sql, values);
  applyProgramRows(byScope, row!);
  sortTiers(programs);
  return true;
}

type ScopePrograms = Map<
  string,
  ProgramBook & { tiers: Map<string, TierChange[]>; ratedOffers: Set<string> }
>;

/** Rows of the program's statement or of the load, given to the books of their brand (tiers: both modes). */
function applyProgramRows(byScope: ScopePrograms, rows: ProgramRows): void {
  for (const t of rows.tiers)
    for (const live of [true, false]) {
      const tiers = byScope.get(`${t.brand_id}/${live}`)?.tiers as Map<string, TierChange[]> | undefined;
      if (!tiers) continue;
      const changes = tiers.get(t.creator_id) ?? [];
      changes.push({ at: Date.parse(t.at), level: t.level });
      tiers.set(t.creator_id, changes);
    }
  for (const f of rows.offers)
    for (const live of [true, false]) byScope.get(`${f.brand_id}/${live}`)?.ratedOffers.add(f.id);
  for (const m of rows.months)
    byScope
      .get(`${m.brand_id}/${m.livemode}`)
      ?.months?.set(m.creator_id, m.time_zone, String(m.month_start).slice(0, 10), Number(m.net_commission));
}

/** Oldest first per creator (a stable sort keeps the statements' order of changes at one instant). */
function sortTiers(programs: readonly { program: { tiers: Map<string, TierChange[]> } }[]): void {
  for (const { program } of programs)
    for (const changes of program.tiers.values()) (changes as TierChange[]).sort((a, b) => a.at - b.at);
}

/**
 * Drops from the wants what the load read: tiers of a creator it found over a span holding the
 * creator's own, creator-months it returned, and every loaded order's offer (it read them all).
 */
function leaveUncovered(
  preloaded: LoadedProgramRows,
  tierWants: Map<string, { brand_id: string; creator_id: string; from: number; to: number }>,
  monthWants: MonthRow[],
  offerWants: Map<string, unknown>,
): void {
  offerWants.clear();
  const found = new Set(preloaded.creators.map((c) => `${c.brand_id}\u0000${c.id}`));
  const spans = new Map(
    preloaded.reads.tiers.map((s) => [s.brand_id, { from: Date.parse(s.from_at), to: Date.parse(s.to_at) }]),
  );
  for (const [key, want] of tierWants) {
    const span = spans.get(want.brand_id);
    if (span && found.has(key) && span.from <= want.from && want.to <= span.to) tierWants.delete(key);
  }
  const read = new Set(
    preloaded.months.map(
      (m) =>
        `${m.brand_id}\u0000${m.livemode}\u0000${m.creator_id}\u0000${m.time_zone}\u0000${String(m.month_start).slice(0, 10)}`,
    ),
  );
  let kept = 0;
  for (const m of monthWants)
    if (
      !read.has(
        `${m.brand_id}\u0000${m.livemode}\u0000${m.creator_id}\u0000${m.time_zone}\u0000${m.month_start}`,
      )
    )
      monthWants[kept++] = m;
  monthWants.length = kept;
}

/** The write of the creator-months a group moved: each row by its delta, under the lock the group holds. */
export function monthCommissionsWrite(books: Iterable<OrderBook>): WritePart {
  return {
    sql: monthUpsert('x.brand_id'),
    rows: [...books].flatMap((book) => book.program?.months?.deltas() ?? []),
  };
}
