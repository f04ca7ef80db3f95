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
import { median } from './cost.js';
import { allProcs, CLK_TCK, processTree } from './cpu.js';
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

/**
 * Batches per brand and round: three quarters of the cost stretch's. A major collection of the
 * web's heap falls inside a round's window or not: the longer the window, the smaller its part
 * of the round's figure.
 */
const programCostBatches = () => Math.max(1, Math.round((options.costBatches * 3) / 4));

const WARM_SINGLES_SECONDS = 10;
const WARM_BATCHES = 30;

/** CPU per event of one brand's stretch: its own web process and the PostgreSQL backends it opened. */
export interface SideCost {
  events: number;
  webMs: number;
  postgresMs: number;
  /** Each round's own figures, when this is their median. */
  rounds?: SideCost[];
}

export interface ProgramCostResult {
  without: [SideCost, SideCost];
  with: [SideCost, SideCost];
  floorWebMs: [number, number];
}

/**
 * One brand's web server, started by the caller with `application` as its connections'
 * `application_name`, so that its PostgreSQL backends are told from the other brand's.
 */
export interface ProgramCostServer {
  pid: number;
  url: string;
  application: string;
}

/** The program's extra as the median of each round's own ratio (both brands ran at the same time). */
export function pairedExtra(without: SideCost, priced: SideCost, key: 'webMs' | 'postgresMs'): number {
  const pairs = (without.rounds ?? [without]).map(
    (w, i) => (priced.rounds ?? [priced])[i]![key] / w[key] - 1,
  );
  return median(pairs);
}

/** Ticks so far of each process of a brand's side: its server's tree, and its backends. */
async function sideTicks(db: pg.Client, server: ProgramCostServer) {
  const { rows } = await db.query<{ pid: number }>(
    'select pid from pg_stat_activity where application_name = $1',
    [server.application],
  );
  const backends = new Set(rows.map((r) => r.pid));
  const procs = allProcs();
  return {
    web: new Map(processTree(server.pid, procs).map((p) => [p.pid, p.ticks])),
    postgres: new Map(procs.filter((p) => backends.has(p.pid)).map((p) => [p.pid, p.ticks])),
  };
}

type Ticks = Awaited<ReturnType<typeof sideTicks>>;

/** Ticks between two marks of the processes alive at the second (a backend opened between counts whole). */
function spent(before: Map<number, number>, after: Map<number, number>): number {
  let ticks = 0;
  for (const [pid, at] of after) ticks += at - (before.get(pid) ?? 0);
  return ticks;
}

/**
 * Both brands' `run`s at once, each on its own server: whatever slows this machine from one second to
 * the next (the host's other tenants, which these vCPUs do not report as steal) lands on both alike.
 * A round measured one brand after the other moved by a quarter from one minute to the next.
 */
async function measureBoth(
  db: pg.Client,
  servers: [ProgramCostServer, ProgramCostServer],
  run: (side: 0 | 1) => Promise<number>,
): Promise<[SideCost, SideCost]> {
  const before = await Promise.all(servers.map((s) => sideTicks(db, s)));
  const counted: Ticks[] = [];
  const events = await Promise.all(
    ([0, 1] as const).map(async (side) => {
      const n = await run(side);
      // Marked as soon as this side's run ends: the other may still be running.
      counted[side] = await sideTicks(db, servers[side]);
      return n;
    }),
  );
  const ms = (ticks: number, n: number) => ((ticks / CLK_TCK) * 1000) / Math.max(n, 1);
  return ([0, 1] as const).map((side) => ({
    events: events[side]!,
    webMs: ms(spent(before[side]!.web, counted[side]!.web), events[side]!),
    postgresMs: ms(spent(before[side]!.postgres, counted[side]!.postgres), events[side]!),
  })) as [SideCost, SideCost];
}

const medianSide = (rounds: SideCost[]): SideCost => ({
  events: median(rounds.map((r) => r.events)),
  webMs: median(rounds.map((r) => r.webMs)),
  postgresMs: median(rounds.map((r) => r.postgresMs)),
  rounds,
});

/**
 * `start` (re)starts both brands' servers: each round runs on processes of its own, so that what
 * one process's compilers happened to decide (a whole run's web figure once read +22% in every
 * round) is one round's sample, not the run's.
 */
export async function programCostRun(
  db: pg.Client,
  orm: MikroORM,
  start: () => Promise<[ProgramCostServer, ProgramCostServer]>,
  adminToken: string,
  fold: () => Promise<unknown>,
): Promise<ProgramCostResult> {
  let servers = await start();
  phase('two brands: one without a program, one with 1,000 SKU rules, 10 tiers and both caps');
  const shops = [
    await makeShop(orm, servers[0], adminToken, 'Bench brand without a program', false),
    await makeShop(orm, servers[0], adminToken, 'Bench brand with a program', true),
  ] as const;
  const singles = (side: 0 | 1, seconds: number) =>
    load({
      url: servers[side].url,
      headers: shops[side].headers,
      connections: 64,
      seconds,
      request: () => ({
        method: 'POST',
        path: '/v1/events',
        body: JSON.stringify(paidWithLines(shops[side].code)),
      }),
    });
  const batches = (side: 0 | 1, amount: number) =>
    load({
      url: servers[side].url,
      headers: shops[side].headers,
      connections: 2,
      amount,
      timeoutSeconds: 120,
      request: () => ({
        method: 'POST',
        path: '/v1/events/batch',
        body: JSON.stringify({ events: Array.from({ length: 500 }, () => paidWithLines(shops[side].code)) }),
      }),
    });
  // Long enough for V8's compilers and heap sizing to settle: with 5 batches a brand the first
  // brand measured kept getting faster for three rounds, the second did not.
  const warmUp = async () => {
    phase(
      `warm-up: ${WARM_SINGLES_SECONDS} s of singles and ${WARM_BATCHES} batches for each brand, at once`,
    );
    await Promise.all(([0, 1] as const).map((side) => singles(side, WARM_SINGLES_SECONDS)));
    await Promise.all(([0, 1] as const).map((side) => batches(side, WARM_BATCHES)));
    await fold();
  };
  const rounds = { singles: [] as [SideCost, SideCost][], batches: [] as [SideCost, SideCost][] };
  const logRound = ([w, p]: [SideCost, SideCost]) =>
    log(
      `  web ${fmt(w.webMs, 3)} / ${fmt(p.webMs, 3)} ms, PostgreSQL ${fmt(w.postgresMs, 3)} / ${fmt(p.postgresMs, 3)} ms per event (without / with the program)`,
    );
  for (let round = 1; round <= options.programCostRounds; round++) {
    if (round > 1) servers = await start();
    await warmUp();
    phase(`both brands at once: singles at 64 connections each for ${options.seconds} s (round ${round})`);
    const s = await measureBoth(db, servers, async (side) => (await singles(side, options.seconds)).whole.ok);
    rounds.singles.push(s);
    logRound(s);
    // The tallies' fold is the same work for both brands' events (a program changes no tally).
    await fold();
    const amount = programCostBatches();
    phase(`both brands at once: ${amount} batches of 500 each, 2 in flight (round ${round})`);
    const b = await measureBoth(db, servers, async (side) => (await batches(side, amount)).whole.ok * 500);
    rounds.batches.push(b);
    logRound(b);
    await fold();
  }
  phase('a bare node HTTP server answering the same requests');
  const floor = await floorCost({ url: servers[0].url, headers: shops[0].headers }, shops[0].code);
  const of = (side: 0 | 1) =>
    [medianSide(rounds.singles.map((r) => r[side])), medianSide(rounds.batches.map((r) => r[side]))] as [
      SideCost,
      SideCost,
    ];
  return { without: of(0), with: of(1), floorWebMs: floor.webMs };
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
full and the monthly cap's row is still locked and written). **Both brands at once**, each on its own
web server (the Procfile's flags), so that whatever slows the machine from one second to the next
lands on both: CPU from /proc per event of each brand's web process and of the PostgreSQL backends
it opened (told apart by \`application_name\`; PostgreSQL's background processes and the tallies'
fold, the same work for both brands' events, are counted for neither). The median of
${r.without[0].rounds?.length ?? 1} rounds, each on both servers started afresh and warmed by ${WARM_SINGLES_SECONDS} s of singles and ${WARM_BATCHES} batches each; the extra in
brackets is the median of the rounds' own ratios. Target: at most +10%.

| per event, ms | web, no program | web, program | PostgreSQL, no program | PostgreSQL, program | web of a bare node server (floor; the demo events, without lines) |
|---|---:|---:|---:|---:|---:|
${row(`singles at 64 connections, ${options.seconds} s`, 0)}
${row(`${programCostBatches()} batches of 500, 2 in flight`, 1)}

Rounds (no program / program, web then PostgreSQL, ms per event): singles ${rounds(0)}. Batches ${rounds(1)}.
`;
}
