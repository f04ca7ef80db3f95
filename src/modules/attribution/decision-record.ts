import type { CommissionPart, ProductMatch } from '../programs/commission.js';
import type { AttributionDecision, ProgramPricing } from './decision.js';
import type { Candidate } from './resolve.js';

/**
 * How a decision is stored in `received_events.attribution` (a `json` column, kept as sent): its
 * values in a fixed order without field names, booleans as 0/1, enums as one letter, and the
 * result as the index of the candidate it came from when it did: a fraction of the object's bytes,
 * stored and in WAL (docs/decisions.md). `readDecision` gives back the object
 * `recordDecision` was given; a decision stored before this form (a JSON object) is read as it is.
 */
export type DecisionRecord = unknown[];

// biome-ignore lint/suspicious/noExplicitAny: positional values, typed by the object they rebuild.
type Values = any[];

/** The first value of a record: its form, so that a later one can be told apart. */
const FORM = 1;

/** Each enum's values by their one-letter code, and back. */
const codes = {
  effect: { a: 'applied', u: 'unchanged' },
  via: { c: 'code', k: 'click', r: 'renewal' },
  rateSource: { o: 'offer', b: 'brand_default', i: 'inherited' },
  zeroedBy: { s: 'self_purchase', r: 'renewal_limit' },
  source: {
    p: 'product',
    n: 'not_eligible',
    t: 'tier',
    o: 'offer',
    d: 'program_default',
    b: 'brand_default',
  },
  cap: { o: 'per_order', m: 'per_creator_month' },
} as const;

/** The items an order.paid carried, as stored with it (`received_events.data.items`). */
export type StoredItems = ReadonlyArray<{ sku?: string | null; amount?: number | null }> | null | undefined;

/** The line a part stands for as the lean form reads it back: the next item carrying an amount, else the rest (null). */
function nextLine(items: StoredItems, from: number): number {
  let i = from;
  while (items && i < items.length && (items[i]!.amount ?? null) === null) i++;
  return items && i < items.length ? i : -1;
}

/** A part's source by its number in the lean form: its index here. */
const SOURCES: readonly CommissionPart['source'][] = [
  'product',
  'not_eligible',
  'tier',
  'offer',
  'program_default',
  'brand_default',
];

/** `SOURCES.indexOf(source)` by a switch: read for every part. */
function sourceIndex(source: CommissionPart['source']): number {
  switch (source) {
    case 'product':
      return 0;
    case 'not_eligible':
      return 1;
    case 'tier':
      return 2;
    case 'offer':
      return 3;
    case 'program_default':
      return 4;
    case 'brand_default':
      return 5;
    default:
      throw new Error(`no stored code for ${source as string}: add one to decision-record.ts`);
  }
}

/**
 * A program's pricing in its lean form: version, tier, the parts flat as numbers (amount, rate,
 * and source + 6 × rule, the rule 0 for none or the line's exact SKU, n for a prefix of the line's
 * SKU of n characters), then before_caps and capped_by_order unless nothing was capped. Each
 * part's line and SKU are the order's items carrying an amount, in order, then the rest;
 * capped_amount and cap follow from the commission. A third of the full form's JSON, and no
 * array per part. A pricing that does not fit it (none that commission.ts makes) is kept in the
 * full form, which `readProgram` still reads.
 */
function recordProgram(p: ProgramPricing, amount: number, items: StoredItems): Values {
  const { parts, rules } = p;
  // Numbers only, in an array of its final length: no change of the array's kind per part.
  const flat = new Array<number>(parts.length * 3);
  let line = nextLine(items, 0);
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const rule = rules[i] ?? null;
    // The part stands where the reader puts it, and its rule is the line's SKU or a prefix of it.
    const sku = line < 0 ? null : (items![line]!.sku ?? null);
    if (part.line !== (line < 0 ? null : line) || part.sku !== sku) return fullProgram(p);
    const source = sourceIndex(part.source);
    let ruleCode = 0;
    // Product and not-eligible parts (0 and 1) have a rule, the others none.
    if (source <= 1 !== (rule !== null)) return fullProgram(p);
    if (rule !== null) {
      const prefix = (rule as { sku_prefix?: string }).sku_prefix;
      if (prefix === undefined) {
        if ((rule as { sku: string }).sku !== sku) return fullProgram(p);
      } else if (sku === null || prefix.length === 0 || !sku.startsWith(prefix)) return fullProgram(p);
      else ruleCode = prefix.length;
    }
    flat[3 * i] = part.amount;
    flat[3 * i + 1] = part.rate_bps;
    flat[3 * i + 2] = source + SOURCES.length * ruleCode;
    if (line >= 0) line = nextLine(items, line + 1);
  }
  if (
    line >= 0 ||
    p.capped_amount !== p.before_caps - amount ||
    p.cap !== capOf(amount, p.before_caps, p.capped_by_order)
  )
    return fullProgram(p);
  // Nothing capped (before_caps is the commission, none cut by order): the figures are left out.
  return p.before_caps === amount && p.capped_by_order === 0
    ? [p.version_id, p.tier, flat]
    : [p.version_id, p.tier, flat, p.before_caps, p.capped_by_order];
}

/** The cap commission-programs.md names: the monthly one when it cut anything, else the per-order one when it did. */
function capOf(amount: number, beforeCaps: number, cappedByOrder: number): ProgramPricing['cap'] {
  return amount < beforeCaps - cappedByOrder ? 'per_creator_month' : cappedByOrder > 0 ? 'per_order' : null;
}

/** The full form: version, tier, parts ([line, sku, amount, rate, source, rule]), figures, cap. */
function fullProgram(p: ProgramPricing): Values {
  return [
    p.version_id,
    p.tier,
    p.parts.map((part, i) => {
      const rule = p.rules[i] ?? null;
      return [
        part.line,
        part.sku,
        part.amount,
        part.rate_bps,
        encode(codes.source, part.source),
        rule === null ? null : 'sku' in rule ? rule.sku : ['p', rule.sku_prefix],
      ];
    }),
    p.before_caps,
    p.capped_amount,
    p.capped_by_order,
    encode(codes.cap, p.cap),
  ];
}

function readProgram(v: Values, amount: number, items: StoredItems): ProgramPricing {
  if (v.length === 3 || v.length === 5) return readLeanProgram(v, amount, items);
  const parts = (v[2] as Values[]).map((x) => ({
    line: x[0],
    sku: x[1],
    amount: x[2],
    rate_bps: x[3],
    source: decode(codes.source, x[4]) as CommissionPart['source'],
  }));
  const rules = (v[2] as Values[]).map((x): ProductMatch | null =>
    x[5] === null ? null : Array.isArray(x[5]) ? { sku_prefix: x[5][1] } : { sku: x[5] },
  );
  return {
    version_id: v[0],
    tier: v[1],
    parts,
    rules,
    before_caps: v[3],
    capped_amount: v[4],
    capped_by_order: v[5],
    cap: decode(codes.cap, v[6]) as ProgramPricing['cap'],
  };
}

function readLeanProgram(v: Values, amount: number, items: StoredItems): ProgramPricing {
  const flat = v[2] as number[];
  const parts: CommissionPart[] = [];
  const rules: Array<ProductMatch | null> = [];
  let line = nextLine(items, 0);
  for (let i = 0; i < flat.length; i += 3) {
    const sku = line < 0 ? null : (items![line]!.sku ?? null);
    const code = flat[i + 2]!;
    const source = SOURCES[code % SOURCES.length] ?? fail(`source ${code}`);
    const ruleCode = Math.floor(code / SOURCES.length);
    parts.push({ line: line < 0 ? null : line, sku, amount: flat[i]!, rate_bps: flat[i + 1]!, source });
    rules.push(
      source !== 'product' && source !== 'not_eligible'
        ? null
        : ruleCode === 0
          ? { sku: sku ?? fail('a product part without its line') }
          : { sku_prefix: (sku ?? fail('a product part without its line')).slice(0, ruleCode) },
    );
    if (line >= 0) line = nextLine(items, line + 1);
  }
  const [versionId, tier] = v;
  const beforeCaps: number = v.length === 3 ? amount : v[3];
  const cappedByOrder: number = v.length === 3 ? 0 : v[4];
  return {
    version_id: versionId,
    tier,
    parts,
    rules,
    before_caps: beforeCaps,
    capped_amount: beforeCaps - amount,
    capped_by_order: cappedByOrder,
    cap: capOf(amount, beforeCaps, cappedByOrder),
  };
}

/** Each enum's codes by value: a record encodes several values per order. */
const codeOf = new Map<object, Map<string, string>>(
  Object.values(codes).map((map) => [
    map,
    new Map(Object.entries(map).map(([code, value]) => [value, code])),
  ]),
);

function encode<T extends Record<string, string>>(map: T, value: T[keyof T] | null): string | null {
  if (value === null) return null;
  const code = codeOf.get(map)!.get(value);
  if (code === undefined) throw new Error(`no stored code for ${value}: add one to decision-record.ts`);
  return code;
}
const decode = <T extends Record<string, string>>(map: T, code: string | null): T[keyof T] | null =>
  code === null ? null : ((map[code] as T[keyof T] | undefined) ?? fail(`unknown code ${code}`));

const bit = (b: boolean | null): number | null => (b === null ? null : b ? 1 : 0);
const bool = (v: number | null): boolean | null => (v === null ? null : v === 1);

function fail(why: string): never {
  throw new Error(`attribution decision stored in an unknown form: ${why}`);
}

const recordCandidate = (c: Candidate): Values =>
  c.type === 'coupon_code'
    ? ['c', c.code, bit(c.found), c.creator_id, c.offer_id]
    : [
        'k',
        c.click_ref,
        c.last_touch_channel,
        bit(c.channel_allows),
        bit(c.found),
        c.creator_id,
        c.offer_id,
        c.clicked_at,
        c.window_days,
        c.age_seconds,
        bit(c.within_window),
        // Only a signed reference's: a recorded click's record stays as it was.
        ...(c.signed ? [bit(c.signature_valid), c.link_id] : []),
      ];

const readCandidate = (v: Values): Candidate =>
  v[0] === 'c'
    ? { type: 'coupon_code', code: v[1], found: bool(v[2]) as boolean, creator_id: v[3], offer_id: v[4] }
    : {
        type: 'click',
        click_ref: v[1],
        last_touch_channel: v[2],
        channel_allows: bool(v[3]) as boolean,
        found: bool(v[4]) as boolean,
        creator_id: v[5],
        offer_id: v[6],
        clicked_at: v[7],
        window_days: v[8],
        age_seconds: v[9],
        within_window: bool(v[10]),
        signed: v.length > 11,
        signature_valid: v.length > 11 ? bool(v[11]) : null,
        link_id: v[12] ?? null,
      };

/** The candidate a result came from, by index: the common case, stored as one digit. */
function resultSource(d: AttributionDecision): number | Values | null {
  const r = d.result;
  if (!r) return null;
  const found = d.candidates.findIndex(
    (c) =>
      (c.type === 'coupon_code' ? 'code' : 'click') === r.via &&
      c.creator_id === r.creator_id &&
      c.offer_id === r.offer_id,
  );
  return found >= 0 ? found : [encode(codes.via, r.via), r.creator_id, r.offer_id];
}

function readResult(stored: number | Values | null, candidates: Candidate[]): AttributionDecision['result'] {
  if (stored === null) return null;
  if (typeof stored === 'number') {
    const c = candidates[stored] ?? fail(`no candidate ${stored}`);
    return {
      via: c.type === 'coupon_code' ? 'code' : 'click',
      creator_id: c.creator_id as string,
      offer_id: c.offer_id,
    };
  }
  return { via: decode(codes.via, stored[0]) as 'code', creator_id: stored[1], offer_id: stored[2] };
}

/** `items`: the order.paid's items as stored with the decision (a program's parts are read from them). */
export function recordDecision(d: AttributionDecision, items?: StoredItems): DecisionRecord {
  const { renewal: r, commission: c } = d;
  return [
    FORM,
    encode(codes.effect, d.effect),
    d.candidates.map(recordCandidate),
    r && [r.parent_order_id, bit(r.parent_found), r.cycle_number, r.recurring_limit, bit(r.beyond_limit)],
    bit(d.sticky),
    resultSource(d),
    d.previous_creator_id,
    bit(d.self_purchase),
    c && [
      c.rate_bps,
      encode(codes.rateSource, c.rate_source),
      c.base_amount,
      c.amount,
      encode(codes.zeroedBy, c.zeroed_by),
      ...(c.program ? [recordProgram(c.program, c.amount, items)] : []),
    ],
  ];
}

/** `items`: the order.paid's items as stored with the decision (`received_events.data.items`). */
export function readDecision(
  stored: DecisionRecord | AttributionDecision,
  items?: StoredItems,
): AttributionDecision {
  if (!Array.isArray(stored)) return stored;
  if (stored[0] !== FORM) fail(`form ${String(stored[0])}`);
  const [, effect, recorded, r, sticky, result, previous, selfPurchase, c] = stored as Values;
  const candidates = (recorded as Values[]).map(readCandidate);
  return {
    effect: decode(codes.effect, effect) as 'applied',
    candidates,
    renewal: r && {
      parent_order_id: r[0],
      parent_found: bool(r[1]) as boolean,
      cycle_number: r[2],
      recurring_limit: r[3],
      beyond_limit: bool(r[4]) as boolean,
    },
    sticky: bool(sticky) as boolean,
    result: readResult(result, candidates),
    previous_creator_id: previous,
    self_purchase: bool(selfPurchase) as boolean,
    commission: c && {
      rate_bps: c[0],
      rate_source: decode(codes.rateSource, c[1]) as 'offer',
      base_amount: c[2],
      amount: c[3],
      zeroed_by: decode(codes.zeroedBy, c[4]),
      ...(c[5] ? { program: readProgram(c[5], c[3], items) } : {}),
    },
  };
}
