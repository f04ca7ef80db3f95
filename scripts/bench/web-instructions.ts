// `npm run bench -- --web-instructions`: machine instructions per single request that the compiled
// WEB process executes, for `--program-cost`'s two brands (one without a program, one with 1,000
// SKU rules, 10 tiers and both caps), counted by valgrind's callgrind. `--program-cost` reads CPU
// time, which a shared machine swings by a third between minutes; an instruction count does not,
// so the program's extra per single can be read while others use the machine.
//
// A private PostgreSQL cluster (bench/serving-instructions.ts), migrated and seeded, runs normally;
// the brands are made through the admin API by the server run normally once. Then, per brand, the
// web process runs under callgrind (V8 with --predictable, as bench/instructions.ts runs it) twice
// from a cold start: W singles, and W + M singles, one request at a time on one connection. The
// difference over M leaves out start-up, warm-up and shutdown alike.
import { spawn, spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { canConnect, freePort } from '../local-services.js';
import { compilingIn } from './instructions.js';
import { load } from './load.js';
import { fmt, log, root, sleep } from './options.js';
import { adminCall, paidWithLines } from './program-cost.js';
import { BENCH_TIER, thousandRules } from './program-rules.js';
import { procfileWebFlags, startServer, stopServer } from './server.js';
import {
  type Cluster,
  countedRun,
  fileInstructions,
  inTreeOf,
  migrateAndSeed,
  newCluster,
  type Prepared,
  pgCtl,
} from './serving-instructions.js';

const WARM_SINGLES = Number(process.env.BENCH_WEB_WARM_SINGLES ?? 300);
const MEASURED_SINGLES = Number(process.env.BENCH_WEB_SINGLES ?? 1000);

interface Shop {
  label: string;
  headers: Record<string, string>;
  code: string;
}

/** `--program-cost`'s brand (bench/program-cost.ts), made through the admin API alone. */
async function makeShop(url: string, token: string, label: string, program: boolean): Promise<Shop> {
  const brand = await adminCall(url, token, 'POST', '/admin/api/brands', {
    name: label,
    rate_limit_per_s: 100_000,
    rate_limit_burst: 1_000_000,
  });
  const base = `/admin/api/brands/${brand.id}`;
  const keys = await adminCall(url, token, 'POST', `${base}/api-keys`, { livemode: true });
  const creator = await adminCall(url, token, 'POST', `${base}/creators`, { name: `${label} creator` });
  const code = `WEB${program ? 'A' : 'N'}${Date.now().toString(36)}`.toUpperCase();
  await adminCall(url, token, 'POST', `${base}/coupon-codes`, { creator_id: creator.id, code });
  if (program) {
    const version = await adminCall(url, token, 'POST', `${base}/commission_program/versions`, {
      rules: thousandRules(),
      time_zone: 'Asia/Seoul',
      note: 'bench: 1,000 SKU rules, 10 tiers, both caps',
    });
    await adminCall(url, token, 'POST', `${base}/commission_program/versions/${version.id}/publish`, {
      effective_from: new Date().toISOString(),
    });
    await adminCall(url, token, 'PUT', `${base}/creators/${creator.id}/tier`, {
      level: BENCH_TIER,
      locked: true,
    });
  }
  const secret = (keys as { secret_key?: string }).secret_key;
  if (!secret) throw new Error(`no secret key in ${JSON.stringify(keys)}`);
  return {
    label,
    code,
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
  };
}

async function singles(url: string, shop: Shop, amount: number): Promise<void> {
  if (amount === 0) return;
  const r = await load({
    url,
    headers: shop.headers,
    connections: 1,
    amount,
    timeoutSeconds: 600,
    request: () => ({ method: 'POST', path: '/v1/events', body: JSON.stringify(paidWithLines(shop.code)) }),
  });
  if (r.whole.ok !== amount) throw new Error(`${amount - r.whole.ok} of ${amount} singles failed`);
}

/** One cold run of the web under callgrind taking `amount` singles of `shop`: its instructions. */
async function countedWeb(
  tree: string,
  cluster: Cluster,
  prepared: Prepared,
  shop: Shop,
  amount: number,
  label: string,
): Promise<{ total: number; compiling: number }> {
  const out = join(cluster.dir, `web-${label}.callgrind`);
  const port = await freePort();
  // At nice 5: the machine is shared, and an instruction count does not depend on the share it gets.
  const child = spawn(
    'nice',
    [
      '-n',
      '5',
      'valgrind',
      '--tool=callgrind',
      '--vgdb=no',
      '--smc-check=all-non-file',
      `--callgrind-out-file=${out}`,
      process.execPath,
      '--predictable',
      ...procfileWebFlags(tree),
      // No major GC in either run (as bench/instructions.ts): one falls in the warm-up run or not by a
      // threshold crossed anywhere, and moved a brand's figure by a tenth.
      '--initial-old-space-size=2048',
      'dist/src/server.js',
    ],
    {
      cwd: tree,
      env: { ...prepared.env, PORT: String(port), WEB_CONCURRENCY: '1' },
      stdio: 'ignore',
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const until = Date.now() + 600_000;
    while (!(await canConnect(port))) {
      if (child.exitCode !== null || Date.now() > until) throw new Error(`the web did not start (${label})`);
      await sleep(500);
    }
    // The first answer can come before the server finished starting (readiness checks): wait for it.
    while ((await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status !== 200) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the web exited (${label})`);
      await sleep(500);
    }
    await singles(`http://127.0.0.1:${port}`, shop, amount);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return { total: fileInstructions(out), compiling: compilingIn(out) };
}

interface WebCount {
  shop: string;
  perSingle: number;
  perSingleCompiled: number;
}

async function countShop(
  tree: string,
  cluster: Cluster,
  prepared: Prepared,
  shop: Shop,
  tag: string,
): Promise<WebCount> {
  const warm = await countedWeb(tree, cluster, prepared, shop, WARM_SINGLES, `${tag}-warm`);
  log(`${shop.label}: ${fmt(warm.total)} instructions for ${WARM_SINGLES} singles`);
  const whole = await countedWeb(
    tree,
    cluster,
    prepared,
    shop,
    WARM_SINGLES + MEASURED_SINGLES,
    `${tag}-whole`,
  );
  log(`${shop.label}: ${fmt(whole.total)} instructions for ${WARM_SINGLES + MEASURED_SINGLES} singles`);
  return {
    shop: shop.label,
    perSingle: (whole.total - warm.total) / MEASURED_SINGLES,
    perSingleCompiled: (whole.total - whole.compiling - (warm.total - warm.compiling)) / MEASURED_SINGLES,
  };
}

/** The tree's migrate and seed on a new cluster, and the two brands made through its server run normally. */
async function prepareShops(
  tree: string,
): Promise<{ cluster: Cluster; prepared: Prepared; shops: [Shop, Shop] }> {
  const cluster = await newCluster();
  try {
    log(`migrating and seeding a private cluster (${cluster.dir})`);
    const prepared = await migrateAndSeed(cluster, tree);
    pgCtl(cluster, 'start');
    try {
      const server = await startServer(prepared.env, '1', join(cluster.dir, 'server-setup.log'), tree);
      try {
        const token = prepared.env.ADMIN_TOKEN!;
        const shops: [Shop, Shop] = [
          await makeShop(server.url, token, 'brand without a program', false),
          await makeShop(server.url, token, 'brand with the program', true),
        ];
        return { cluster, prepared, shops };
      } finally {
        await stopServer(server);
      }
    } finally {
      pgCtl(cluster, 'stop');
    }
  } catch (err) {
    done(cluster);
    throw err;
  }
}

function done(cluster: Cluster): void {
  if (process.env.BENCH_KEEP_CALLGRIND === '1') log(`callgrind files kept in ${cluster.dir}`);
  else rmSync(cluster.dir, { recursive: true, force: true });
}

/** The web's counts for a tree (PostgreSQL runs normally). */
async function webCounts(tree: string, label: string): Promise<WebCount[]> {
  const { cluster, prepared, shops } = await prepareShops(tree);
  try {
    pgCtl(cluster, 'start');
    try {
      const counts: WebCount[] = [];
      for (const [i, shop] of shops.entries()) {
        const count = await countShop(tree, cluster, prepared, shop, `b${i}`);
        counts.push({ ...count, shop: `${label}: ${count.shop}` });
      }
      return counts;
    } finally {
      pgCtl(cluster, 'stop');
    }
  } finally {
    done(cluster);
  }
}

/** PostgreSQL's client backends' counts for a tree (bench/serving-instructions.ts `countedRun`; the web runs normally). */
async function postgresCounts(tree: string, label: string): Promise<WebCount[]> {
  const { cluster, prepared, shops } = await prepareShops(tree);
  try {
    const counts: WebCount[] = [];
    for (const [i, shop] of shops.entries()) {
      const run = (amount: number, tag: string) =>
        countedRun(cluster, tree, prepared, (target) => singles(target.url, shop, amount), `b${i}-${tag}`);
      const warm = await run(WARM_SINGLES, 'warm');
      const whole = await run(WARM_SINGLES + MEASURED_SINGLES, 'whole');
      const perSingle = (whole - warm) / MEASURED_SINGLES;
      log(`${label}, ${shop.label}: PostgreSQL ${fmt(perSingle)} instructions per single`);
      counts.push({ shop: `${label}: ${shop.label}`, perSingle, perSingleCompiled: Number.NaN });
    }
    return counts;
  } finally {
    done(cluster);
  }
}

function table(title: string, counts: WebCount[], compiled: boolean): string {
  const lines: string[] = [];
  for (let i = 0; i + 1 < counts.length; i += 2) {
    const [plain, priced] = [counts[i]!, counts[i + 1]!];
    const extra = (of: (c: WebCount) => number) =>
      `${fmt(of(priced) - of(plain))} (${((100 * (of(priced) - of(plain))) / of(plain)).toFixed(1)}%)`;
    for (const c of [plain, priced])
      lines.push(`| ${c.shop} | ${fmt(c.perSingle)} |${compiled ? ` ${fmt(c.perSingleCompiled)} |` : ''}`);
    lines.push(
      `| the program's extra | ${extra((c) => c.perSingle)} |${compiled ? ` ${extra((c) => c.perSingleCompiled)} |` : ''}`,
    );
  }
  return [
    '',
    `${title} per single order.paid (--program-cost's events, one request at a time; ${MEASURED_SINGLES} singles past ${WARM_SINGLES}):`,
    '',
    `| brand | per single |${compiled ? ' without the optimizing compilers |' : ''}`,
    `|---|---:|${compiled ? '---:|' : ''}`,
    ...lines,
    '',
  ].join('\n');
}

export async function webInstructions(postgres: boolean, against: string | undefined): Promise<void> {
  if (spawnSync('valgrind', ['--version']).status !== 0)
    throw new Error('--web-instructions needs valgrind on PATH: install the Debian package valgrind.');
  // BENCH_SKIP_BUILD=1: dist/ as it is (another count running from it at the same time).
  if (process.env.BENCH_SKIP_BUILD !== '1')
    spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  const count = postgres ? postgresCounts : webCounts;
  const counts: WebCount[] = [];
  if (against !== undefined) counts.push(...(await inTreeOf(against, (tree) => count(tree, against))));
  // BENCH_AGAINST_ONLY=1: only REV's figures (this checkout counted by a run of its own beside it).
  if (against === undefined || process.env.BENCH_AGAINST_ONLY !== '1')
    counts.push(...(await count(root, 'this checkout')));
  process.stdout.write(
    table(postgres ? 'PostgreSQL instructions (client backends)' : 'Web instructions', counts, !postgres),
  );
}
