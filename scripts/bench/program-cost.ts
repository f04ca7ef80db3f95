// `npm run bench -- --program-cost`: what a commission program costs per event
// (commission-programs.md; the target: a brand with a program of 1,000 SKU rules, 10 tiers and
// both caps costs at most 10% more web and PostgreSQL CPU per event than a brand without one).
// Two brands of one database take the same events (three lines with SKUs, one matching an exact
// rule, one a prefix rule, one none), single requests at 64 connections and 500-event batches,
// the brands alternating within each round; each figure is the median of its rounds.
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { createBrand } from '../../src/modules/brands/brands.service.js';
import { issueKeys } from '../../src/modules/keys/keys.service.js';
import { type EventCost, measure, median, medianCost } from './cost.js';
import { floorCost } from './floor.js';
import { load } from './load.js';
import { fmt, log, options, phase } from './options.js';
import { BENCH_TIER, benchLines, thousandRules } from './program-rules.js';

interface Shop {
  label: string;
  brandId: string;
  headers: Record<string, string>;
  code: string;
}

let sequence = 0;
const tag = Date.now().toString(36);

/** An order.paid of three lines: one SKU an exact rule names, one a prefix rule's, one no rule's. */
export function paidWithLines(code: string) {
  sequence += 1;
  return {
    type: 'order.paid',
    data: {
      order_id: `prog-${tag}-${sequence}`,
      amount: 129_000,
      currency: 'KRW',
      coupon_code: code,
      items: benchLines(sequence),
    },
  };
}

/** One admin API call of the bench's setup; throws with the answer unless it succeeded. */
export async function adminCall(url: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** A brand with a creator and a coupon code, and with `program` a published version of it in force. */
async function makeShop(
  orm: MikroORM,
  server: { url: string },
  adminToken: string,
  label: string,
  program: boolean,
): Promise<Shop> {
  const brand = await createBrand(orm.em.fork(), {
    name: label,
    rate_limit_per_s: 100_000,
    rate_limit_burst: 1_000_000,
  });
  const keys = await issueKeys(orm.em.fork(), brand.id, true);
  const base = `/admin/api/brands/${brand.id}`;
  const creator = await adminCall(server.url, adminToken, 'POST', `${base}/creators`, {
    name: `${label} creator`,
  });
  const code = `PROG${program ? 'A' : 'N'}${tag}`.toUpperCase().slice(0, 40);
  await adminCall(server.url, adminToken, 'POST', `${base}/coupon-codes`, { creator_id: creator.id, code });
  if (program) {
    const version = await adminCall(server.url, adminToken, 'POST', `${base}/commission_program/versions`, {
      rules: thousandRules(),
      time_zone: 'Asia/Seoul',
      note: 'bench: 1,000 SKU rules, 10 tiers, both caps',
    });
    await adminCall(
      server.url,
      adminToken,
      'POST',
      `${base}/commission_program/versions/${version.id}/publish`,
      {
        effective_from: new Date().toISOString(),
      },
    );
    await adminCall(server.url, adminToken, 'PUT', `${base}/creators/${creator.id}/tier`, {
      level: BENCH_TIER,
      locked: true,
    });
  }
  return {
    label,
    brandId: brand.id,
    code,
    headers: { authorization: `Bearer ${keys.secret_key}`, 'content-type': 'application/json' },
  };
}

const WARM_SINGLES_SECONDS = 10;
const WARM_BATCHES = 30;

export interface ProgramCostResult {
  without: [EventCost, EventCost];
  with: [EventCost, EventCost];
  floorWebMs: [number, number];
}

/**
 * The program's extra as the median of each round's own ratio: a round's two brands ran within
 * the same minute, so a slow minute or a late major collection moves one round's pair, not the
 * figure (the ratio of the two medians can pair a fast minute of one brand with a slow one of the other).
 */
export function pairedExtra(without: EventCost, priced: EventCost, key: 'webMs' | 'postgresMs'): number {
  const pairs = (without.rounds ?? [without]).map(
    (w, i) => (priced.rounds ?? [priced])[i]![key] / w[key] - 1,
  );
  return median(pairs);
}

export async function programCostRun(
  db: pg.Client,
  orm: MikroORM,
  server: { pid: number; url: string },
  adminToken: string,
  fold: () => Promise<unknown>,
): Promise<ProgramCostResult> {
  phase('two brands: one without a program, one with 1,000 SKU rules, 10 tiers and both caps');
  const plain = await makeShop(orm, server, adminToken, 'Bench brand without a program', false);
  const priced = await makeShop(orm, server, adminToken, 'Bench brand with a program', true);
  const singles = (shop: Shop, seconds: number) =>
    load({
      url: server.url,
      headers: shop.headers,
      connections: 64,
      seconds,
      request: () => ({ method: 'POST', path: '/v1/events', body: JSON.stringify(paidWithLines(shop.code)) }),
    });
  const batches = (shop: Shop, amount: number) =>
    load({
      url: server.url,
      headers: shop.headers,
      connections: 2,
      amount,
      timeoutSeconds: 120,
      request: () => ({
        method: 'POST',
        path: '/v1/events/batch',
        body: JSON.stringify({ events: Array.from({ length: 500 }, () => paidWithLines(shop.code)) }),
      }),
    });
  // Long enough for V8's compilers and heap sizing to settle: with 5 batches a brand the first
  // brand measured kept getting faster for three rounds, the second did not.
  phase(`warm-up: ${WARM_SINGLES_SECONDS} s of singles and ${WARM_BATCHES} batches for each brand`);
  for (const shop of [plain, priced]) {
    await singles(shop, WARM_SINGLES_SECONDS);
    await batches(shop, WARM_BATCHES);
  }
  const runs = new Map<Shop, { singles: EventCost[]; batches: EventCost[] }>([
    [plain, { singles: [], batches: [] }],
    [priced, { singles: [], batches: [] }],
  ]);
  for (let round = 1; round <= options.programCostRounds; round++) {
    const order = round % 2 ? [plain, priced] : [priced, plain];
    for (const shop of order) {
      phase(`${shop.label}: singles at 64 connections for ${options.seconds} s (round ${round})`);
      const s = await measure(
        db,
        server.pid,
        'singles',
        async () => (await singles(shop, options.seconds)).whole.ok,
        fold,
      );
      runs.get(shop)!.singles.push(s);
      log(`  web ${fmt(s.webMs, 3)} ms, PostgreSQL ${fmt(s.postgresMs, 3)} ms per event`);
    }
    for (const shop of order) {
      phase(`${shop.label}: ${options.costBatches / 4} batches of 500, 2 in flight (round ${round})`);
      const b = await measure(
        db,
        server.pid,
        'batches',
        async () => (await batches(shop, options.costBatches / 4)).whole.ok * 500,
        fold,
      );
      runs.get(shop)!.batches.push(b);
      log(`  web ${fmt(b.webMs, 3)} ms, PostgreSQL ${fmt(b.postgresMs, 3)} ms per event`);
    }
  }
  phase('a bare node HTTP server answering the same requests');
  const floor = await floorCost({ url: server.url, headers: plain.headers }, plain.code);
  const of = (shop: Shop) =>
    [medianCost(runs.get(shop)!.singles), medianCost(runs.get(shop)!.batches)] as [EventCost, EventCost];
  return { without: of(plain), with: of(priced), floorWebMs: floor.webMs };
}

export const PROGRAM_COST_HEADING = '## Commission programs: cost per event';

export function renderProgramCost(r: ProgramCostResult): string {
  const pct = (extra: number) => `${extra >= 0 ? '+' : ''}${fmt(100 * extra, 1)}%`;
  const row = (name: string, i: 0 | 1) => {
    const [w, p] = [r.without[i], r.with[i]];
    return `| ${name} | ${fmt(w.webMs, 3)} | ${fmt(p.webMs, 3)} (${pct(pairedExtra(w, p, 'webMs'))}) | ${fmt(w.postgresMs, 3)} | ${fmt(p.postgresMs, 3)} (${pct(pairedExtra(w, p, 'postgresMs'))}) | ${fmt(r.floorWebMs[i], 3)} |`;
  };
  const rounds = (i: 0 | 1) =>
    (r.without[i].rounds ?? [])
      .map((w, k) => {
        const p = r.with[i].rounds![k]!;
        return `${fmt(w.webMs, 3)} / ${fmt(p.webMs, 3)} and ${fmt(w.postgresMs, 3)} / ${fmt(p.postgresMs, 3)}`;
      })
      .join('; ');
  return `${PROGRAM_COST_HEADING}

\`npm run bench -- --program-cost\`: two brands of one fresh database take the same new attributed
order.paid events (three lines with SKUs: one an exact rule names, one a prefix rule's, one no
rule's); one brand has no program, the other a published version of 1,000 SKU rules (500 exact,
500 prefix), 10 tiers (its creator's tier set) and both caps (set high, so every order is priced in
full and the monthly cap's row is still locked and written). CPU from /proc per event, the median
of ${r.without[0].rounds?.length ?? 1} rounds, the brands alternating within each, after ${WARM_SINGLES_SECONDS} s of singles and ${WARM_BATCHES}
batches of warm-up each; the extra in brackets is the median of the rounds' own ratios (a round's two
brands ran within the same minute). Target: at most +10%.

| per event, ms | web, no program | web, program | PostgreSQL, no program | PostgreSQL, program | web of a bare node server (floor; the demo events, without lines) |
|---|---:|---:|---:|---:|---:|
${row(`singles at 64 connections, ${options.seconds} s`, 0)}
${row(`${options.costBatches / 4} batches of 500, 2 in flight`, 1)}

Rounds (no program / program, web then PostgreSQL, ms per event): singles ${rounds(0)}. Batches ${rounds(1)}.
`;
}
