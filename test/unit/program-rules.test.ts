import { describe, expect, it } from 'vitest';
import {
  canonicalRules,
  canonicalTimeZone,
  checkRules,
  type ProgramRules,
  ProgramRulesIn,
} from '../../src/modules/programs/programs.schemas.js';
import { versionInForceAt } from '../../src/modules/programs/programs.service.js';
import { AppError } from '../../src/shared/errors.js';

/** The rules' schema and semantic checks, and the pick of the version in force (commission-programs.md). */
const refusal = (run: () => void) => {
  try {
    run();
  } catch (err) {
    if (err instanceof AppError) return { code: err.code, param: err.details.param };
    throw err;
  }
  return undefined;
};

describe('program rules', () => {
  it('fills every default: no program rate, no product rates, no tiers, no caps; window 30 days; caps null', () => {
    expect(ProgramRulesIn.parse({})).toEqual({
      default_rate_bps: null,
      product_rates: [],
      tiers: null,
      caps: null,
    });
    const parsed: ProgramRules = ProgramRulesIn.parse({
      tiers: { levels: [{ key: 'a', name: 'A', min_net_revenue: 0, rate_bps: 1 }] },
      caps: {},
      product_rates: [{ match: { sku_prefix: 'X' }, eligible: false }],
    });
    expect(parsed.tiers?.window_days).toBe(30);
    expect(parsed.caps).toEqual({ per_order: null, per_creator_month: null });
    expect(parsed.product_rates).toEqual([{ match: { sku_prefix: 'X' }, eligible: false }]);
  });

  it('a match has exactly one of sku and sku_prefix, a rule exactly one of rate_bps and eligible: false', () => {
    const ok = (rule: unknown) => ProgramRulesIn.safeParse({ product_rates: [rule] }).success;
    expect(ok({ match: { sku: 'A' }, rate_bps: 0 })).toBe(true);
    expect(ok({ match: { sku: 'A' }, rate_bps: 10_000 })).toBe(true);
    expect(ok({ match: { sku: 'A' }, rate_bps: 10_001 })).toBe(false);
    expect(ok({ match: { sku: 'A', sku_prefix: 'A' }, rate_bps: 1 })).toBe(false);
    expect(ok({ match: {}, rate_bps: 1 })).toBe(false);
    expect(ok({ match: { sku: 'A' }, rate_bps: 1, eligible: false })).toBe(false);
    expect(ok({ match: { sku: 'A' } })).toBe(false);
    expect(ok({ match: { sku: 'A' }, eligible: true })).toBe(false);
  });

  it('names the later duplicate rule and the later overlapping level', () => {
    const rules = (product_rates: unknown[], levels?: unknown[]) =>
      ProgramRulesIn.parse({ product_rates, ...(levels && { tiers: { levels } }) });
    expect(
      refusal(() =>
        checkRules(
          rules([
            { match: { sku: 'A' }, rate_bps: 1 },
            { match: { sku_prefix: 'A' }, rate_bps: 1 },
            { match: { sku: 'a' }, rate_bps: 1 },
            { match: { sku: 'A' }, eligible: false },
          ]),
        ),
      ),
    ).toEqual({ code: 'duplicate_product_rule', param: 'rules.product_rates[3].match.sku' });
    const level = (key: string, min: number) => ({ key, name: key, min_net_revenue: min, rate_bps: 1 });
    expect(refusal(() => checkRules(rules([], [level('a', 1), level('b', 2), level('a', 3)])))).toEqual({
      code: 'overlapping_tiers',
      param: 'rules.tiers.levels[2].key',
    });
    expect(refusal(() => checkRules(rules([], [level('a', 1), level('b', 1)])))).toEqual({
      code: 'overlapping_tiers',
      param: 'rules.tiers.levels[1].min_net_revenue',
    });
    expect(
      refusal(() => checkRules(rules([{ match: { sku: 'A' }, rate_bps: 1 }], [level('a', 1)]))),
    ).toBeUndefined();
  });

  it('puts stored rules back in their documented order', () => {
    const stored = {
      caps: { per_creator_month: null, per_order: 5 },
      tiers: null,
      product_rates: [{ rate_bps: 3, match: { sku: 'A' } }],
      default_rate_bps: 1,
    } as ProgramRules;
    expect(JSON.stringify(canonicalRules(stored))).toBe(
      '{"default_rate_bps":1,"product_rates":[{"match":{"sku":"A"},"rate_bps":3}],"tiers":null,"caps":{"per_order":5,"per_creator_month":null}}',
    );
  });

  it('takes IANA names only, in their canonical spelling', () => {
    expect(canonicalTimeZone('asia/seoul')).toBe('Asia/Seoul');
    expect(canonicalTimeZone('UTC')).toBe('UTC');
    for (const name of ['KST', '+09:00', 'Mars/Olympus', '', 'Asia/Seoul '])
      expect(canonicalTimeZone(name), name).toBeUndefined();
  });
});

describe('the version in force', () => {
  const at = (iso: string) => new Date(iso);
  const versions = [
    { id: 'v1', effectiveFrom: at('2026-12-01T00:00:00Z') },
    { id: 'v2', effectiveFrom: at('2027-01-01T00:00:00Z') },
  ];
  it('is the latest effective at or before the instant; none before the first', () => {
    expect(versionInForceAt(versions, at('2026-11-30T23:59:59.999Z'))).toBeUndefined();
    expect(versionInForceAt(versions, at('2026-12-01T00:00:00Z'))?.id).toBe('v1');
    expect(versionInForceAt(versions, at('2026-12-31T23:59:59Z'))?.id).toBe('v1');
    expect(versionInForceAt(versions, at('2027-01-01T00:00:00Z'))?.id).toBe('v2');
    expect(versionInForceAt([], at('2027-01-01T00:00:00Z'))).toBeUndefined();
  });
});
