import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../scripts/local-services.js';

/**
 * A PostgreSQL cluster of its own (initdb in a temporary directory, own port) and a streaming
 * replica of it (`pg_basebackup -R`), for tests of reads that go to a replica. Its own primary
 * keeps the replica's WAL to what the test writes: a replica of the shared test cluster would
 * have to copy and replay every other test file's databases, which under a full `npm test`
 * took over a minute. PostgreSQL refuses to run as root, so both run as the postgres user.
 */
const PG_BIN = '/usr/lib/postgresql/15/bin';
export const canMakeReplica =
  process.getuid?.() === 0 && existsSync(`${PG_BIN}/initdb`) && existsSync('/usr/sbin/runuser');

const asPostgres = (command: string, args: string[]) =>
  execFileSync('/usr/sbin/runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' });

export interface Replica {
  url(database: string): string;
  /** Waits until the replica has replayed everything the primary has written so far. */
  caughtUp(): Promise<void>;
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Stops it (immediate shutdown): its connections drop, new ones are refused. */
  stop(): void;
}

export interface ReplicatedCluster {
  /** A database on the primary, migrated. */
  primaryUrl: string;
  replica: Replica;
  /** Stops both servers and deletes their files. */
  remove(): void;
}

async function query(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  // A server stopped under an idle client must not become an uncaught exception.
  client.on('error', () => {});
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
}

function startServer(dir: string, data: string, port: number, settings: string[] = []): () => void {
  asPostgres(`${PG_BIN}/pg_ctl`, [
    '-D',
    data,
    '-l',
    `${data}.log`,
    '-w',
    'start',
    '-o',
    [`-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, ...settings].join(' '),
  ]);
  const stop = () => {
    // Dropped once stopped: a worker process runs one file after another (test/setup/per-file.ts).
    process.removeListener('exit', stop);
    try {
      asPostgres(`${PG_BIN}/pg_ctl`, ['-D', data, '-m', 'immediate', '-w', 'stop']);
    } catch {
      // Already stopped.
    }
  };
  process.once('exit', stop);
  return stop;
}

export async function startReplicatedCluster(
  migrate: (url: string) => Promise<unknown>,
): Promise<ReplicatedCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'lf-replica-'));
  chmodSync(dir, 0o777);
  const primaryData = join(dir, 'primary');
  const replicaData = join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  // initdb's pg_hba.conf already trusts local replication connections.
  asPostgres(`${PG_BIN}/initdb`, ['-D', primaryData, '-U', 'postgres', '-A', 'trust', '--no-sync']);
  const stopPrimary = startServer(dir, primaryData, primaryPort);
  const admin = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
  await query(admin, 'create database lf_replicated');
  const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/lf_replicated`;
  await migrate(primaryUrl);

  asPostgres(`${PG_BIN}/pg_basebackup`, [
    '-h',
    dir,
    '-p',
    String(primaryPort),
    '-U',
    'postgres',
    '-D',
    replicaData,
    '-R',
    '-X',
    'stream',
    '-c',
    'fast',
  ]);
  const stopReplica = startServer(dir, replicaData, replicaPort, ['-c hot_standby=on']);
  const url = (database: string) => `postgres://postgres@127.0.0.1:${replicaPort}/${database}`;
  const replica: Replica = {
    url,
    async caughtUp() {
      const target = (await query(admin, 'select pg_current_wal_lsn()::text as lsn')).rows[0].lsn;
      for (let i = 0; i < 400; i++) {
        const { rows } = await query(
          url('postgres'),
          `select pg_last_wal_replay_lsn() >= '${target}'::pg_lsn as done`,
        );
        if (rows[0].done) return;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new Error('the replica did not catch up within 10 s');
    },
    pauseReplay: async () => void (await query(url('postgres'), 'select pg_wal_replay_pause()')),
    resumeReplay: async () => void (await query(url('postgres'), 'select pg_wal_replay_resume()')),
    stop: stopReplica,
  };
  return {
    primaryUrl,
    replica,
    remove() {
      stopReplica();
      stopPrimary();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
