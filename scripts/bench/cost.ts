// What one event costs (issue 22), which the machine's load does not distort the way it does
// throughput: web and PostgreSQL CPU, WAL written, bytes stored and transactions committed per
// new attributed order.paid, as single requests at 64 connections and as 500-event batches with
// 2 in flight. Measured right after phase (a), on the still fresh database, in BENCH_COST_ROUNDS
// rounds: each figure is the median of its rounds.
import type pg from 'pg';
import { allProcs, CLK_TCK, processTree } from './cpu.js';
import { floorCost } from './floor.js';
import { batchesPaid, singlePaid } from './load.js';
import { fmt, log, options, phase } from './options.js';

export interface EventCost {
  label: string;
  events: number;
  webMs: number;
  postgresMs: number;
  walBytes: number;
  storedBytes: number;
  commits: number;
  /** Web CPU per event of a bare node HTTP server answering the same requests (floor.ts). */
  floorWebMs?: number;
  /** Each round's own figures, when this is their median. */
  rounds?: EventCost[];
}

/** The middle value (the mean of the two middle ones for an even count). */
export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** Each figure the median of the rounds' (so one round on a slow minute moves none of them). */
export function medianCost(rounds: EventCost[]): EventCost {
  const of = (key: 'webMs' | 'postgresMs' | 'walBytes' | 'storedBytes' | 'commits') =>
    median(rounds.map((r) => r[key]));
  return {
    label: rounds[0]!.label,
    events: median(rounds.map((r) => r.events)),
    webMs: of('webMs'),
    postgresMs: of('postgresMs'),
    walBytes: of('walBytes'),
    storedBytes: of('storedBytes'),
    commits: of('commits'),
    rounds,
  };
}

/** The targets issue 22 sets, per event: [single, batch]. */
export const costTargets = {
  webMs: [0.09, 0.015],
  postgresMs: [0.07, 0.035],
  walBytes: [1600, 1500],
  storedBytes: [1100, 1100],
} as const;

/** Ticks of every PostgreSQL process, ended backends included (the postmaster's children's). */
function postgresTicks(): number {
  const procs = allProcs().filter((p) => p.comm === 'postgres');
  const pids = new Set(procs.map((p) => p.pid));
  return procs.reduce((sum, p) => sum + p.ticks + (pids.has(p.ppid) ? 0 : p.childTicks), 0);
}

const serverTicks = (pid: number) => processTree(pid).reduce((sum, p) => sum + p.ticks, 0);

interface Mark {
  web: number;
  postgres: number;
  wal: string;
  bytes: number;
  commits: number;
}

async function mark(db: pg.Client, serverPid: number): Promise<Mark> {
  const { rows } = await db.query<{ wal: string; bytes: string; commits: string }>(
    `select pg_current_wal_lsn()::text as wal,
            (select sum(pg_total_relation_size(c.oid)) from pg_class c
              where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'm'))::text as bytes,
            (select xact_commit from pg_stat_database where datname = current_database())::text as commits`,
  );
  return {
    web: serverTicks(serverPid),
    postgres: postgresTicks(),
    wal: rows[0]!.wal,
    bytes: Number(rows[0]!.bytes),
    commits: Number(rows[0]!.commits),
  };
}

/** Backends report their commit counts within 10 s of going idle (PGSTAT_IDLE_INTERVAL). */
const statsSettle = () => new Promise((resolve) => setTimeout(resolve, 11_000));

export async function measure(
  db: pg.Client,
  serverPid: number,
  label: string,
  run: () => Promise<number>,
  fold: () => Promise<unknown>,
): Promise<EventCost> {
  await fold();
  await statsSettle();
  const before = await mark(db, serverPid);
  const events = await run();
  // What report-rollup does with the events' tallies is part of what they cost.
  await fold();
  const cpuAfter = { web: serverTicks(serverPid), postgres: postgresTicks() };
  await statsSettle();
  const after = await mark(db, serverPid);
  const { rows } = await db.query<{ wal: string }>('select pg_wal_lsn_diff($1, $2)::text as wal', [
    after.wal,
    before.wal,
  ]);
  const per = (total: number) => total / Math.max(events, 1);
  const ms = (ticks: number) => (ticks / CLK_TCK) * 1000;
  return {
    label,
    events,
    webMs: per(ms(cpuAfter.web - before.web)),
    postgresMs: per(ms(cpuAfter.postgres - before.postgres)),
    walBytes: per(Number(rows[0]!.wal)),
    storedBytes: per(after.bytes - before.bytes),
    // The two marks' own statements are not the events'.
    commits: per(after.commits - before.commits - 1),
  };
}

export async function costPerEvent(
  db: pg.Client,
  server: { pid: number; url: string },
  headers: Record<string, string>,
  code: string,
  fold: () => Promise<unknown>,
): Promise<EventCost[]> {
  const target = { url: server.url, headers };
  const singles: EventCost[] = [];
  const batches: EventCost[] = [];
  for (let round = 1; round <= options.costRounds; round++) {
    const of = options.costRounds > 1 ? ` (round ${round} of ${options.costRounds})` : '';
    phase(`cost per event: single order.paid at 64 connections${of}`);
    singles.push(
      await measure(
        db,
        server.pid,
        'single requests at 64 connections',
        async () => (await singlePaid(target, code, 64, options.seconds)).whole.ok,
        fold,
      ),
    );
    phase(`cost per event: ${options.costBatches} batches of 500 events, 2 in flight${of}`);
    batches.push(
      await measure(
        db,
        server.pid,
        '500-event batches, 2 in flight',
        async () => (await batchesPaid(target, code, 500, options.costBatches, 2)).whole.ok * 500,
        fold,
      ),
    );
    if (options.costRounds > 1)
      for (const c of [singles.at(-1)!, batches.at(-1)!])
        log(`  round ${round}, ${c.label}: web ${fmt(c.webMs, 3)} ms, PostgreSQL ${fmt(c.postgresMs, 3)} ms`);
  }
  const single = medianCost(singles);
  const batch = medianCost(batches);
  for (const c of [single, batch])
    log(
      `  ${c.label}: web ${fmt(c.webMs, 3)} ms, PostgreSQL ${fmt(c.postgresMs, 3)} ms, WAL ${fmt(c.walBytes)} B, stored ${fmt(c.storedBytes)} B, ${fmt(c.commits, 3)} commits per event (${fmt(c.events)} events)`,
    );
  phase('cost per event: a bare node HTTP server answering the same requests');
  const floor = await floorCost(target, code);
  [single.floorWebMs, batch.floorWebMs] = floor.webMs;
  log(`  the bare server: web ${fmt(floor.webMs[0], 3)} / ${fmt(floor.webMs[1], 3)} ms per event`);
  return [single, batch];
}

/** Each round's CPU figures, after the medians' table (none for a single round). */
function roundRows(single: EventCost, batch: EventCost): string {
  if (!single.rounds || single.rounds.length < 2 || !batch.rounds) return '';
  const lines = single.rounds.map((s, i) => {
    const b = batch.rounds![i]!;
    return `| ${i + 1} | ${fmt(s.webMs, 3)} / ${fmt(b.webMs, 3)} | ${fmt(s.postgresMs, 3)} / ${fmt(b.postgresMs, 3)} | ${fmt(s.walBytes)} / ${fmt(b.walBytes)} | ${fmt(s.storedBytes)} / ${fmt(b.storedBytes)} |`;
  });
  return `
| round (single / batch) | web CPU, ms | PostgreSQL CPU, ms | WAL, bytes | stored, bytes |
|---:|---:|---:|---:|---:|
${lines.join('\n')}
`;
}

/** The cost section of docs/benchmarks.md: each figure beside issue 22's target. */
export function renderCost(costs: EventCost[]): string {
  const [single, batch] = costs as [EventCost, EventCost];
  const row = (name: string, key: keyof typeof costTargets, digits: number) => {
    const [ts, tb] = costTargets[key];
    const cell = (v: number, t: number) => `${fmt(v, digits)} (≤ ${fmt(t, digits)}${v <= t ? ', met' : ''})`;
    return `| ${name} | ${cell(single[key], ts)} | ${cell(batch[key], tb)} |`;
  };
  const rounds = single.rounds?.length ?? 1;
  return `## Cost per event

New attributed \`order.paid\` events on the fresh database right after phase (a), each figure per event
over the whole stretch (${fmt(single.events)} single requests at 64 connections for ${options.seconds} s; ${fmt(batch.events)} events in
${options.costBatches} batches of 500, 2 in flight)${rounds > 1 ? `, the median of ${rounds} rounds of both stretches run one after the other (each round's figures below the table: this machine's speed swings within minutes)` : ''}. CPU from /proc (web: the server and its workers; PostgreSQL: every
postgres process, ended backends included), WAL from \`pg_current_wal_lsn()\`, stored bytes from
\`pg_total_relation_size\` of every table (indexes and TOAST included), commits from \`pg_stat_database\`
read after its 10 s reporting delay. Each stretch ends with \`report-rollup\`'s fold of its tallies (in the
bench process, so its PostgreSQL side counts and its Node side does not). In brackets: issue 22's target.

| per event | single requests at 64 connections | 500-event batches, 2 in flight |
|---|---:|---:|
${row('web process CPU (user + system), ms', 'webMs', 3)}
${row('PostgreSQL CPU (all its processes), ms', 'postgresMs', 3)}
${row('WAL written, bytes', 'walBytes', 0)}
${row('tables + indexes grown, bytes', 'storedBytes', 0)}
| transactions committed | ${fmt(single.commits, 3)} | ${fmt(batch.commits, 3)} |
${
  single.floorWebMs !== undefined && batch.floorWebMs !== undefined
    ? `| web CPU of a bare node HTTP server answering the same requests, ms | ${fmt(single.floorWebMs, 3)} | ${fmt(batch.floorWebMs, 3)} |

The last row is the floor under the first: right after the two stretches, a server of node's \`http\` alone
(scripts/bench/floor-server.mjs) took the same load, reading each body, parsing its JSON and answering with
the service's own response headers and answer (one per event), with no key check, validation, rate limit or
database. What the service adds to it is ${fmt(single.webMs - single.floorWebMs, 3)} ms a single event and ${fmt(batch.webMs - batch.floorWebMs, 3)} ms a batch event.
`
    : ''
}${roundRows(single, batch)}`;
}
