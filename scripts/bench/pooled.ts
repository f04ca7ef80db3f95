// The pooled run (issue 19): single order.paid at 16 and 64 connections and the 500-event batches
// again, with a second server whose DATABASE_URL goes through a private PgBouncer in transaction
// mode (DATABASE_DIRECT_URL the server itself, for the key cache's LISTEN), beside the direct
// figures of the same run. BENCH_POOLED=0 skips it; so does a machine without pgbouncer.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { findPgBouncer, type RunningPgBouncer, startPgBouncer } from '../pgbouncer.js';
import { type CpuSplit, withCpu } from './cpu.js';
import { batchEventsPerS, batchesFor, batchesPaid, type LoadStat, singlePaid, type Target } from './load.js';
import { fmt, log, ms, options, phase, tmpDir } from './options.js';
import { type RunningServer, startServer, stopServer } from './server.js';
import type { Context } from './setup.js';

export interface PooledSettings {
  /** `pgbouncer --version`, first line. */
  version: string;
  poolMode: string;
  /** `default_pool_size`: server connections PgBouncer opens for the bench database. */
  poolSize: number;
  maxClientConn: number;
  /** The server's pools per process, as in the direct run. */
  poolMax: number;
  ingestionPoolMax: number;
  /** Server processes seen (WEB_CONCURRENCY). */
  processes: number;
  /** DATABASE_PREPARED_STATEMENTS of the direct run and of the pooled one (always false: PgBouncer < 1.21). */
  preparedDirect: string;
  preparedPooled: string;
}

export interface PooledRun {
  run: LoadStat;
  cpu: CpuSplit;
}

export type PooledResult =
  | { status: 'skipped'; reason: string }
  | { status: 'failed'; reason: string; settings?: PooledSettings }
  | {
      status: 'ran';
      settings: PooledSettings;
      singles: PooledRun[];
      batches: PooledRun & { eventsPerS: number };
    };

function version(binary: string): string {
  try {
    return execFileSync(binary, ['--version'], { encoding: 'utf8' }).split('\n')[0]!.trim();
  } catch (err) {
    return `${binary} (version unknown: ${(err as Error).message.split('\n')[0]})`;
  }
}

/** BENCH_POOLED_WARMUP_SECONDS split: batches first, then up to 5 s of singles. */
export function pooledWarmup(): { batchesSeconds: number; singlesSeconds: number } {
  const total = options.pooledWarmupSeconds;
  const singlesSeconds = Math.min(5, Math.ceil(total / 3));
  return { batchesSeconds: total - singlesSeconds, singlesSeconds };
}

/** The pooler's pool: the server's pools summed over its processes, unless BENCH_POOLER_POOL_SIZE says. */
export function poolerPoolSize(): number {
  if (options.poolerPoolSize > 0) return options.poolerPoolSize;
  return Number(options.webConcurrency) * (options.poolMax + options.ingestionPoolMax);
}

export async function pooledRun(ctx: Context, code: string): Promise<PooledResult> {
  const { env, databaseUrl: directUrl, headers } = ctx;
  if (!options.pooled) return { status: 'skipped', reason: 'BENCH_POOLED=0' };
  const binary = findPgBouncer();
  if (!binary) {
    log('  pgbouncer is not installed: the pooled run is skipped');
    return {
      status: 'skipped',
      reason: 'pgbouncer is not installed (Debian/Ubuntu: `sudo apt-get install -y pgbouncer`)',
    };
  }
  phase(`pooled: the server again, through PgBouncer (transaction mode, pool ${poolerPoolSize()})`);
  let pooler: RunningPgBouncer | undefined;
  let server: RunningServer | undefined;
  let settings: PooledSettings | undefined;
  try {
    pooler = await startPgBouncer(directUrl, { poolSize: poolerPoolSize() });
    settings = {
      version: version(binary),
      poolMode: pooler.poolMode,
      poolSize: pooler.poolSize,
      maxClientConn: pooler.maxClientConn,
      poolMax: options.poolMax,
      ingestionPoolMax: options.ingestionPoolMax,
      processes: 0,
      preparedDirect: env.DATABASE_PREPARED_STATEMENTS?.trim() || 'false',
      preparedPooled: 'false',
    };
    log(`  ${pooler.description}, ${settings.version}`);
    server = await startServer(
      {
        ...env,
        DATABASE_URL: pooler.url,
        DATABASE_DIRECT_URL: directUrl,
        DATABASE_PREPARED_STATEMENTS: 'false',
      },
      options.webConcurrency,
      join(tmpDir, 'server-pooled.log'),
    );
    settings.processes = server.processes;
    const to: Target = { url: server.url, headers };
    const poolerPid = pooler.pid;
    const serverPid = server.pid;
    // The direct figures ran on a server warmed by the growth (and PgBouncer opens its server
    // connections as the load asks for them): a few seconds are not enough, batches especially.
    const { batchesSeconds, singlesSeconds } = pooledWarmup();
    log(
      `  server pid ${serverPid} on ${server.url}; warm-up: ${batchesSeconds} s of ${options.batchSize}-event batches, ` +
        `${singlesSeconds} s of singles at 16 connections`,
    );
    if (batchesSeconds > 0)
      await batchesFor(to, code, options.batchSize, batchesSeconds, options.batchConnections);
    if (singlesSeconds > 0) await singlePaid(to, code, 16, singlesSeconds);

    const singles: PooledRun[] = [];
    for (const connections of options.pooledLevels) {
      phase(`pooled: single order.paid at ${connections} connections through PgBouncer`);
      const [run, cpu] = await withCpu(
        serverPid,
        () => singlePaid(to, code, connections, options.seconds),
        poolerPid,
      );
      log(
        `  ${connections} connections: ${fmt(run.whole.rps)}/s, p50 ${ms(run.whole.p50)} ms, ` +
          `p99 ${ms(run.whole.p99)} ms, ${run.whole.bad} failed; PgBouncer ${fmt(cpu.pooler ?? 0)}% CPU`,
      );
      singles.push({ run: run.whole, cpu });
    }

    phase(
      `pooled: ${options.batches} batches of ${options.batchSize} events, ${options.batchConnections} connection(s), through PgBouncer`,
    );
    await batchesPaid(to, code, options.batchSize, 2 * options.batchConnections, options.batchConnections); // warm-up
    const [batchRun, batchCpu] = await withCpu(
      serverPid,
      () => batchesPaid(to, code, options.batchSize, options.batches, options.batchConnections),
      poolerPid,
    );
    const eventsPerS = batchEventsPerS(batchRun.whole, options.batchSize, options.batchConnections);
    log(
      `  batches: ${fmt(eventsPerS)} events/s, p50 ${ms(batchRun.whole.p50)} ms, ${batchRun.whole.bad} failed; ` +
        `PgBouncer ${fmt(batchCpu.pooler ?? 0)}% CPU`,
    );
    return { status: 'ran', settings, singles, batches: { run: batchRun.whole, cpu: batchCpu, eventsPerS } };
  } catch (err) {
    // The direct figures are worth keeping: the report says what failed instead of the run dying.
    const reason = (err as Error).message.split('\n').slice(0, 3).join(' ');
    log(`  the pooled run failed: ${(err as Error).stack ?? err}`);
    return { status: 'failed', reason, ...(settings && { settings }) };
  } finally {
    await stopServer(server);
    await pooler?.stop();
  }
}
