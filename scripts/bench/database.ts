// The bench database: recreated, migrated and seeded like production (compiled scripts), kept away
// from ANALYZE, and inspected (statistics state, what the run wrote).
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { log, options, root } from './options.js';

export interface Seed {
  brand_id: string;
  keys: { sk_live: string };
  creators: { creator_id: string; coupon_code: string; offer_id: string; click_ref: string }[];
}

/** Drops and recreates the bench database, refusing if someone else is connected to it. */
export async function recreateDatabase(databaseUrl: string): Promise<void> {
  const adminUrl = new URL(databaseUrl);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: number }>(
      'select count(*)::int as n from pg_stat_activity where datname = $1',
      [options.db],
    );
    if (rows[0]!.n > 0) {
      throw new Error(
        `database ${options.db} has ${rows[0]!.n} open session(s): another bench may be running. ` +
          `Run with BENCH_DB=${options.db}_2 (or wait).`,
      );
    }
    await admin.query(`drop database if exists ${pg.escapeIdentifier(options.db)} with (force)`);
    await admin.query(`create database ${pg.escapeIdentifier(options.db)}`);
  } finally {
    await admin.end();
  }
}

function runScript(name: string, env: NodeJS.ProcessEnv, cwd = root): string {
  return execFileSync(process.execPath, ['scripts/entry.mjs', name], {
    cwd,
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** `cwd`: the checkout whose migrate runs (another revision's adds its release's stored statements). */
export function migrate(env: NodeJS.ProcessEnv, cwd = root): void {
  runScript('migrate', env, cwd);
}

export function seed(env: NodeJS.ProcessEnv, cwd = root): Seed {
  return JSON.parse(runScript('seed', env, cwd)) as Seed;
}

/**
 * Nothing may ANALYZE the bench database behind the run's back. When the server runs autovacuum,
 * it is switched off on every table of this database (right after migrating); returns what was done.
 */
export async function keepUnanalyzed(db: pg.Client): Promise<string> {
  const { rows } = await db.query<{ autovacuum: string }>('show autovacuum');
  if (rows[0]!.autovacuum !== 'on') return 'autovacuum is off on this PostgreSQL server';
  const tables = await db.query<{ name: string }>(
    `select format('%I.%I', schemaname, tablename) as name from pg_tables where schemaname = 'public'`,
  );
  for (const { name } of tables.rows) {
    await db.query(`alter table ${name} set (autovacuum_enabled = false, toast.autovacuum_enabled = false)`);
  }
  return `autovacuum is on on this PostgreSQL server, so the bench disabled it on the ${tables.rows.length} tables of \`${options.db}\` right after migrating (\`alter table … set (autovacuum_enabled = false)\`)`;
}

export interface StatRow {
  relname: string;
  last_analyze: string | null;
  last_autoanalyze: string | null;
  analyze_count: number;
  autoanalyze_count: number;
  n_live_tup: number;
  reltuples: number;
}

export async function analyzeState(db: pg.Client): Promise<StatRow[]> {
  const { rows } = await db.query<StatRow>(
    `select s.relname, s.last_analyze::text, s.last_autoanalyze::text,
            s.analyze_count::int, s.autoanalyze_count::int, s.n_live_tup::int, c.reltuples::float8 as reltuples
       from pg_stat_user_tables s join pg_class c on c.oid = s.relid
      where s.relname in ('orders', 'clicks', 'coupon_codes')
      order by s.relname`,
  );
  return rows;
}

export const neverAnalyzed = (rows: StatRow[]) =>
  rows.length === 3 &&
  rows.every((r) => !r.last_analyze && !r.last_autoanalyze && r.analyze_count + r.autoanalyze_count === 0);

/**
 * Writes out what the phase before left dirty (a checkpoint, then the kernel's page cache) before a
 * measured stretch starts: after the report phase's bulk load of a million orders, the kernel's
 * flusher threads took 30% of a core during the pooled batches and 3% during the direct ones.
 */
export async function settleWrites(db: pg.Client): Promise<void> {
  try {
    // CHECKPOINT needs a superuser or pg_checkpoint's membership, which a managed database may not grant.
    await db.query('checkpoint');
    execFileSync('sync');
  } catch (err) {
    log(
      `  could not write out what the last phase left dirty (${(err as Error).message.trim()}): the next stretch may share the machine with it`,
    );
  }
}

export async function liveOrders(db: pg.Client, brandId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'select count(*)::int as n from orders where brand_id = $1 and livemode',
    [brandId],
  );
  return rows[0]!.n;
}

export interface Mix {
  via: string;
  orders: number;
}

export async function orderMix(db: pg.Client, brandId: string): Promise<{ mix: Mix[]; refunds: number }> {
  const mix = await db.query<Mix>(
    `select coalesce(attributed_via, 'unattributed') as via, count(*)::int as orders
       from orders where brand_id = $1 and livemode group by 1 order by 2 desc`,
    [brandId],
  );
  const refunds = await db.query<{ n: number }>(
    `select count(*)::int as n from refunds where brand_id = $1 and livemode and kind = 'refund'`,
    [brandId],
  );
  return { mix: mix.rows, refunds: refunds.rows[0]!.n };
}
