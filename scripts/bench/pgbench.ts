// pgbench beside the HTTP figures: the same client count, the same database. Writes run with
// -M prepared (the service's ingestion statements are named prepared statements, src/db/fast-path/transaction.ts);
// reads with -M simple (the order reads go through MikroORM's em.execute, values written into the
// text and planned on every request).
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** The standalone scripts in scripts/bench/ (the service's own SQL is captured into tmp/ each run). */
export const pgbenchScripts = {
  minimal: join(import.meta.dirname, 'minimal-order-paid.sql'),
  readOrder: join(import.meta.dirname, 'read-order.sql'),
  listPage: join(import.meta.dirname, 'list-page.sql'),
};

export type Mode = 'prepared' | 'simple';

export function findPgbench(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'pgbench'))) return join(dir, 'pgbench');
  }
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    for (const version of readdirSync(base).sort().reverse()) {
      const candidate = join(base, version, 'bin', 'pgbench');
      if (existsSync(candidate)) return candidate;
    }
  }
  throw new Error('pgbench not found: install Debian/Ubuntu package postgresql-client (or postgresql).');
}

export interface Statement {
  ms: number;
  sql: string;
}

export interface PgbenchResult {
  clients: number;
  tps: number;
  latencyMs: number;
  transactions: number;
  failed: number;
  statements: Statement[];
  /** Set when pgbench itself failed (a client aborted, a bad script); the figures are then NaN. */
  error?: string;
}

export type PgVars = Record<string, string | number>;

export class Pgbench {
  constructor(
    private readonly binary: string,
    private readonly databaseUrl: string,
  ) {}

  private env(): NodeJS.ProcessEnv {
    const url = new URL(this.databaseUrl);
    return {
      ...process.env,
      PGHOST: url.hostname,
      PGPORT: url.port || '5432',
      PGUSER: decodeURIComponent(url.username || 'postgres'),
      ...(url.password && { PGPASSWORD: decodeURIComponent(url.password) }),
    };
  }

  private args(script: string, clients: number, length: string[], vars: PgVars, mode: Mode): string[] {
    return [
      '-n', // no vacuum (it would also analyze)
      '-r',
      '-M',
      mode,
      '-f',
      script,
      '-c',
      String(clients),
      '-j',
      String(Math.min(2, clients)),
      ...length,
      ...Object.entries(vars).flatMap(([k, v]) => ['-D', `${k}=${v}`]),
      decodeURIComponent(new URL(this.databaseUrl).pathname.slice(1)),
    ];
  }

  /** A few transactions of a script: a broken script stops the run before the long part. */
  async check(script: string, vars: PgVars, mode: Mode = 'prepared'): Promise<void> {
    try {
      await execFileAsync(this.binary, this.args(script, 1, ['-t', '3'], vars, mode), { env: this.env() });
    } catch (err) {
      const e = err as { stderr?: string; stdout?: string; message: string };
      throw new Error(`pgbench ${script} failed:\n${e.stderr || e.stdout || e.message}`);
    }
  }

  async run(
    script: string,
    clients: number,
    seconds: number,
    vars: PgVars,
    mode: Mode = 'prepared',
  ): Promise<PgbenchResult> {
    let out: string;
    try {
      ({ stdout: out } = await execFileAsync(
        this.binary,
        this.args(script, clients, ['-T', String(seconds)], vars, mode),
        { env: this.env(), maxBuffer: 16 * 1024 * 1024 },
      ));
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      const reason = (e.stderr || e.message).trim().split('\n').slice(0, 3).join(' / ');
      return {
        clients,
        tps: Number.NaN,
        latencyMs: Number.NaN,
        transactions: 0,
        failed: 0,
        statements: [],
        error: reason,
      };
    }
    const tps = /tps = ([\d.]+)/.exec(out);
    if (!tps) throw new Error(`could not read pgbench output:\n${out}`);
    // Per-statement latencies (-r): "   0.712   0  select ..." lines (the second column is failures).
    const statements = [...out.matchAll(/^\s+([\d.]+)\s+\d+\s+(\S.*)$/gm)]
      .filter((m) => !m[2]!.startsWith('\\'))
      .map((m) => ({ ms: Number(m[1]), sql: m[2]! }));
    return {
      clients,
      tps: Number(tps[1]),
      latencyMs: Number(/latency average = ([\d.]+) ms/.exec(out)?.[1] ?? Number.NaN),
      transactions: Number(/number of transactions actually processed: (\d+)/.exec(out)?.[1] ?? 0),
      failed: Number(/number of failed transactions: (\d+)/.exec(out)?.[1] ?? 0),
      statements,
    };
  }
}
