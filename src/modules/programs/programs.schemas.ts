import { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { pageOf, pageQuery } from '../../shared/paging.js';
import { text } from '../../shared/text.js';

/**
 * A commission program's rules as the engine consumes them (commission-programs.md, "Objects"):
 * what a parsed `rules` body is, with every default filled in.
 */
export interface ProgramRules {
  default_rate_bps: number | null;
  product_rates: Array<{
    match: { sku: string } | { sku_prefix: string };
    rate_bps?: number;
    eligible?: false;
  }>;
  tiers: {
    window_days: number;
    levels: Array<{ key: string; name: string; min_net_revenue: number; rate_bps: number }>;
  } | null;
  caps: { per_order: number | null; per_creator_month: number | null } | null;
}

export const MAX_PRODUCT_RATES = 1000;
export const MAX_TIER_LEVELS = 20;
export const DEFAULT_TIME_ZONE = 'Asia/Seoul';

const bpsRule = 'must be an integer from 0 to 10000 (basis points: 1000 = 10%)';
const rateBps = z.int({ error: bpsRule }).min(0, bpsRule).max(10_000, bpsRule);
const krwRule = 'must be a whole number of KRW, 0 or more';
const krw = z.int({ error: krwRule }).min(0, krwRule);
const skuText = text().min(1).max(120);

/**
 * `{sku}` or `{sku_prefix}`, exactly one: one strict object with both optional, so an unknown
 * field is named by its own path (a union would name only `match`).
 */
const ProductMatch = z
  .strictObject({
    sku: skuText.optional().meta({ description: 'This SKU exactly (case-sensitive).' }),
    sku_prefix: skuText.optional().meta({
      description: 'Every SKU starting with this (case-sensitive); the longest matching prefix wins.',
    }),
  })
  .superRefine((m, ctx) => {
    if ((m.sku === undefined) === (m.sku_prefix === undefined))
      ctx.addIssue({ code: 'custom', message: 'must have exactly one of sku and sku_prefix' });
  })
  .transform((m): { sku: string } | { sku_prefix: string } =>
    m.sku !== undefined ? { sku: m.sku } : { sku_prefix: m.sku_prefix! },
  )
  .meta({ description: '`{"sku": …}` or `{"sku_prefix": …}`, exactly one.' });

const ProductRate = z
  .strictObject({
    match: ProductMatch,
    rate_bps: rateBps.optional().meta({ description: 'The rate of a matching line.' }),
    eligible: z
      .literal(false, { error: 'may only be false (a line that earns nothing); omit it to give a rate_bps' })
      .optional()
      .meta({ description: '`false`: a matching line earns nothing and counts toward nothing.' }),
  })
  .superRefine((r, ctx) => {
    if ((r.rate_bps === undefined) === (r.eligible === undefined))
      ctx.addIssue({ code: 'custom', message: 'must have exactly one of rate_bps and eligible: false' });
  });

const TierLevel = z.strictObject({
  key: z
    .string()
    .regex(/^[a-z0-9_]{1,40}$/, 'must be 1 to 40 characters of a-z, 0-9 and _')
    .meta({ description: 'Stable name of the level (`gold`), as a creator’s tier names it.' }),
  name: text().min(1).max(100).meta({ description: 'What the brand calls it.' }),
  min_net_revenue: krw.meta({
    description: 'KRW of net revenue over the window from which a creator reaches the level.',
  }),
  rate_bps: rateBps,
});

const Tiers = z.strictObject({
  window_days: z
    .int({ error: 'must be an integer from 1 to 365' })
    .min(1, 'must be an integer from 1 to 365')
    .max(365, 'must be an integer from 1 to 365')
    .default(30)
    .meta({ description: 'Days of net revenue a level is judged on (default 30).' }),
  levels: z.array(TierLevel).min(1).max(MAX_TIER_LEVELS),
});

const Caps = z.strictObject({
  per_order: krw
    .nullable()
    .default(null)
    .meta({ description: 'KRW one order can earn at most; null: no cap.' }),
  per_creator_month: krw.nullable().default(null).meta({
    description: "KRW one creator can earn per calendar month (in the version's time_zone); null: no cap.",
  }),
});

/** `rules` of a request body: unknown fields refused at every level, defaults filled in. */
export const ProgramRulesIn = z
  .strictObject({
    default_rate_bps: rateBps.nullable().default(null).meta({
      description:
        "The program's rate where nothing more specific applies; null: the brand's default_commission_bps.",
    }),
    product_rates: z
      .array(ProductRate)
      .max(MAX_PRODUCT_RATES, `must hold at most ${MAX_PRODUCT_RATES} rules`)
      .default([])
      .meta({
        description: `Per-product rates, at most ${MAX_PRODUCT_RATES}; an exact sku beats any prefix.`,
      }),
    tiers: Tiers.nullable().default(null),
    caps: Caps.nullable().default(null),
  })
  .meta({ id: 'CommissionProgramRulesIn' });

// The parsed rules are exactly the engine's type, both ways.
type Parsed = z.output<typeof ProgramRulesIn>;
const _toEngine = (r: Parsed): ProgramRules => r;
const _fromEngine = (r: ProgramRules): Parsed => r;
void _toEngine;
void _fromEngine;

const timeZone = text().max(64).meta({
  description: 'IANA time zone name (default Asia/Seoul): the monthly cap counts calendar months in it.',
});
const note = text().max(200).nullable().meta({ description: 'Free text for ops, at most 200 characters.' });

export const ProgramVersionCreate = z
  .strictObject({ rules: ProgramRulesIn, time_zone: timeZone.optional(), note: note.optional() })
  .meta({ id: 'CommissionProgramVersionCreate' });

export const ProgramVersionPatch = z
  .strictObject({ rules: ProgramRulesIn.optional(), time_zone: timeZone.optional(), note: note.optional() })
  .meta({ id: 'CommissionProgramVersionPatch' });

export const ProgramVersionPublish = z
  .strictObject({
    effective_from: z.iso.datetime({ offset: true }).meta({
      description:
        'When the version comes into force: now or later (60 s of clock skew allowed), and after every published version’s.',
    }),
  })
  .meta({ id: 'CommissionProgramVersionPublish' });

export const ProgramVersionsParams = z.strictObject({ brand_id: text().max(40) });
export const ProgramVersionParams = z.strictObject({ brand_id: text().max(40), version_id: text().max(40) });
export const ProgramVersionListQuery = z.strictObject(pageQuery);

/** The rules as answered: what was stored, every default filled in. */
const ProgramRulesOut = z
  .object({
    default_rate_bps: z.int().nullable(),
    product_rates: z.array(
      z.object({
        match: z.union([z.object({ sku: z.string() }), z.object({ sku_prefix: z.string() })]),
        rate_bps: z.int().optional(),
        eligible: z.literal(false).optional(),
      }),
    ),
    tiers: z
      .object({
        window_days: z.int(),
        levels: z.array(
          z.object({ key: z.string(), name: z.string(), min_net_revenue: z.int(), rate_bps: z.int() }),
        ),
      })
      .nullable(),
    caps: z.object({ per_order: z.int().nullable(), per_creator_month: z.int().nullable() }).nullable(),
  })
  .meta({ id: 'CommissionProgramRules' });

export const ProgramVersionOut = z
  .object({
    id: z.string().meta({ description: 'Prefix `cpv_`.' }),
    object: z.literal('commission_program_version'),
    brand_id: z.string(),
    number: z.int().meta({ description: '1, 2, … per brand, in order of creation.' }),
    status: z.enum(['draft', 'published']).meta({
      description: '`draft` (may be changed) or `published` (immutable; in force from `effective_from`).',
    }),
    note: z.string().nullable(),
    time_zone: z.string(),
    rules: ProgramRulesOut,
    effective_from: z.iso.datetime().nullable().meta({ description: 'Null while a draft.' }),
    created_at: z.iso.datetime(),
    published_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'CommissionProgramVersion' });

export const ProgramVersionList = pageOf(ProgramVersionOut, 'CommissionProgramVersionList');

export const CommissionProgramOut = z
  .object({
    object: z.literal('commission_program'),
    current: ProgramVersionOut.nullable().meta({
      description:
        'The published version in force now; null before the first takes effect (today’s rates apply).',
    }),
    next: ProgramVersionOut.nullable().meta({
      description: 'The published version that takes effect next, after now; null if none is scheduled.',
    }),
  })
  .meta({ id: 'CommissionProgram' });

/** The examples' rules: a serum line at 15%, a gift set excluded, two tiers, both caps. */
const exampleRules: ProgramRules = {
  default_rate_bps: 1000,
  product_rates: [
    { match: { sku_prefix: 'SERUM-' }, rate_bps: 1500 },
    { match: { sku: 'GIFT-SET-01' }, eligible: false },
  ],
  tiers: {
    window_days: 30,
    levels: [
      { key: 'silver', name: 'Silver', min_net_revenue: 1_000_000, rate_bps: 1200 },
      { key: 'gold', name: 'Gold', min_net_revenue: 5_000_000, rate_bps: 1500 },
    ],
  },
  caps: { per_order: 50_000, per_creator_month: 2_000_000 },
};

export const programVersionExample = {
  id: 'cpv_01kb3x8d7e9f0g1h2j3k4m5n6p',
  object: 'commission_program_version',
  brand_id: 'brand_01kb2w7c6d8e9f0g1h2j3k4m5n',
  number: 2,
  status: 'published',
  note: 'Winter program: serums at 15%, gift sets excluded',
  time_zone: 'Asia/Seoul',
  rules: exampleRules,
  effective_from: '2026-12-01T00:00:00.000Z',
  created_at: '2026-11-28T09:00:00.000Z',
  published_at: '2026-11-28T09:30:00.000Z',
} as const satisfies z.input<typeof ProgramVersionOut>;

export const programVersionBodyExample = {
  rules: exampleRules,
  time_zone: 'Asia/Seoul',
  note: 'Winter program: serums at 15%, gift sets excluded',
};

/** An IANA name Node knows, in its canonical spelling (`asia/seoul` → `Asia/Seoul`); else undefined. */
export function canonicalTimeZone(name: string): string | undefined {
  // Offsets (`+09:00`) and bare abbreviations Intl also takes are no IANA names.
  if (!/^[A-Za-z_]+(\/[A-Za-z0-9_+-]+)*$/.test(name)) return undefined;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return undefined;
  }
}

/** 422 `invalid_time_zone` unless `name` is an IANA time zone name; its canonical spelling. */
export function checkTimeZone(name: string, param = 'time_zone'): string {
  const canonical = canonicalTimeZone(name);
  if (canonical === undefined)
    throw new AppError('invalid_time_zone', `${param}: '${name}' is not an IANA time zone name.`, {
      param,
      hint: 'Use a name of the IANA time zone database, e.g. Asia/Seoul or America/New_York.',
    });
  return canonical;
}

/**
 * What the schema cannot say: 422 `duplicate_product_rule` for a `sku` or a `sku_prefix` given
 * twice, 422 `overlapping_tiers` for two levels with the same key or min_net_revenue; `param`
 * names the later one.
 */
export function checkRules(rules: ProgramRules, prefix = 'rules'): void {
  const seen = { sku: new Set<string>(), sku_prefix: new Set<string>() };
  rules.product_rates.forEach((rule, i) => {
    const [kind, value] =
      'sku' in rule.match
        ? (['sku', rule.match.sku] as const)
        : (['sku_prefix', rule.match.sku_prefix] as const);
    if (seen[kind].has(value))
      throw new AppError(
        'duplicate_product_rule',
        `${prefix}.product_rates[${i}] matches ${kind} '${value}', as an earlier rule does.`,
        {
          param: `${prefix}.product_rates[${i}].match.${kind}`,
          hint: 'Give each sku, and each sku_prefix, one rule: remove or merge the later one.',
        },
      );
    seen[kind].add(value);
  });
  if (!rules.tiers) return;
  const keys = new Set<string>();
  const floors = new Set<number>();
  rules.tiers.levels.forEach((level, i) => {
    const at = `${prefix}.tiers.levels[${i}]`;
    const hint = 'Give each level its own key and its own min_net_revenue.';
    if (keys.has(level.key))
      throw new AppError('overlapping_tiers', `${at}.key '${level.key}' is an earlier level's key too.`, {
        param: `${at}.key`,
        hint,
      });
    if (floors.has(level.min_net_revenue))
      throw new AppError(
        'overlapping_tiers',
        `${at}.min_net_revenue ${level.min_net_revenue} is an earlier level's min_net_revenue too.`,
        { param: `${at}.min_net_revenue`, hint },
      );
    keys.add(level.key);
    floors.add(level.min_net_revenue);
  });
}

/**
 * The rules in their documented order, each rule with only its own fields: jsonb keeps an object's
 * keys in its own order, so what is read back is put in order again before it is answered.
 */
export function canonicalRules(rules: ProgramRules): ProgramRules {
  return {
    default_rate_bps: rules.default_rate_bps,
    product_rates: rules.product_rates.map((r) => ({
      match: 'sku' in r.match ? { sku: r.match.sku } : { sku_prefix: r.match.sku_prefix },
      ...(r.rate_bps !== undefined ? { rate_bps: r.rate_bps } : { eligible: false as const }),
    })),
    tiers: rules.tiers && {
      window_days: rules.tiers.window_days,
      levels: rules.tiers.levels.map((l) => ({
        key: l.key,
        name: l.name,
        min_net_revenue: l.min_net_revenue,
        rate_bps: l.rate_bps,
      })),
    },
    caps: rules.caps && { per_order: rules.caps.per_order, per_creator_month: rules.caps.per_creator_month },
  };
}
