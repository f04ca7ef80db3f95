import { randomInt } from 'node:crypto';
import pg from 'pg';
import { sqlLiteral } from '../../src/db/fast-path/index.js';

/**
 * The databases a test run creates, and their cleanup. Every one is named `lf_test_run<tag>_…`
 * (`testDatabaseName`), the tag being the run's, so the run's teardown drops whatever its files
 * left, also when a file failed before its own cleanup. A run holds a session advisory lock on
 * its tag for as long as it lives: a later run drops the databases of a run that holds none (one
 * killed before its teardown), never those of a run still going on the same server (several
 * checkouts share one PostgreSQL here and on developers' machines).
 *
 * Templates (`lf_test_template_<hash of the migrations>`) stay between runs by design, so a rerun
 * does not migrate again. Each run records on its template when it last used it; a template no
 * run has used for TEMPLATE_UNUSED_DAYS (another branch's or an older migration set) is dropped.
 */
const RUN_LOCK_CLASS = 4243;
const RUN_PREFIX = 'lf_test_run';
export const TEMPLATE_PREFIX = 'lf_test_template_';
export const TEMPLATE_UNUSED_DAYS = 7;
const USED = 'lf test template, last used ';

/** A name for a test database of run `tag`; `label` says what for (`typo`, `empty`, `dev`). */
export function runDatabaseName(tag: string, label: string, suffix: string): string {
  return `${RUN_PREFIX}${tag}_${label ? `${label}_` : ''}${suffix}`;
}

const runKey = (tag: string) => Number.parseInt(tag, 16);

/** Starts a run: its tag, and the lock that tells other runs it is alive, held on `client`. */
export async function startRun(client: pg.Client): Promise<string> {
  const key = randomInt(1, 2 ** 31);
  await client.query('select pg_advisory_lock($1, $2)', [RUN_LOCK_CLASS, key]);
  return key.toString(16).padStart(8, '0');
}

/** The comment of a run's database its file is done with (`closeRunDatabase`). */
const CLOSED = 'lf test database, closed';

/** Whether `name` is a database of run `tag`. */
export function ofRun(tag: string, name: string): boolean {
  return name.startsWith(runDatabaseName(tag, '', ''));
}

/**
 * A file is done with a database of its run: its connections are ended (PgBouncer's too) and it
 * is marked closed, and the run's teardown drops it without naming it as left behind. Not dropped
 * here: PostgreSQL (15) makes every DROP DATABASE wait for a checkpoint of the whole server, which
 * while the other files write took 1.1 s a drop on average at load 8 (125 of the suite's 640
 * worker-seconds); drops side by side at the teardown share their checkpoints, with little to write.
 */
export async function closeRunDatabase(client: pg.Client, name: string): Promise<void> {
  await client.query(
    'select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()',
    [name],
  );
  // A database never created (a test that failed before) has nothing to close.
  const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
  if (rowCount === 1)
    await client.query(`comment on database ${pg.escapeIdentifier(name)} is ${sqlLiteral(CLOSED)}`);
}

/**
 * Drops `names`, 8 at a time on connections like `client`'s: a DROP DATABASE waits for a
 * checkpoint, and drops waiting together are served by the same one.
 */
async function dropAll(client: pg.Client, names: string[]): Promise<void> {
  const queue = [...names];
  const dropper = async () => {
    if (queue.length === 0) return;
    const { host, port, user, password, database } = client;
    const own = new pg.Client({ host, port, user, password, database });
    await own.connect();
    try {
      for (let name = queue.shift(); name !== undefined; name = queue.shift())
        await own.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
    } finally {
      await own.end();
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, names.length) }, dropper));
}

/**
 * Drops every database of run `tag`; returns those its files did not close (a file that failed
 * before its cleanup), each with the file that created it.
 */
export async function dropRunDatabases(client: pg.Client, tag: string): Promise<string[]> {
  const { rows } = await client.query<{ name: string; file: string | null }>(
    `select datname as name, shobj_description(oid, 'pg_database') as file
       from pg_database where starts_with(datname, $1) order by datname`,
    [`${RUN_PREFIX}${tag}_`],
  );
  await dropAll(
    client,
    rows.map((r) => r.name),
  );
  return rows.filter((r) => r.file !== CLOSED).map((r) => (r.file ? `${r.name} (${r.file})` : r.name));
}

/** Drops the databases of runs that ended without their teardown (no run holds their lock). */
export async function dropDeadRunsDatabases(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `select datname as name from pg_database where starts_with(datname, $1)`,
    [RUN_PREFIX],
  );
  const { rows: alive } = await client.query<{ key: string }>(
    `select objid::text as key from pg_locks where locktype = 'advisory' and classid = $1 and objsubid = 2`,
    [RUN_LOCK_CLASS],
  );
  const living = new Set(alive.map((a) => Number(a.key)));
  const dead = rows
    .map((r) => r.name)
    .filter((name) => {
      const tag = /^lf_test_run([0-9a-f]{8})_/.exec(name)?.[1];
      return tag !== undefined && !living.has(runKey(tag));
    });
  await dropAll(client, dead);
  return dead;
}

/**
 * Records that this run uses `template`, and drops the templates no run has used for
 * TEMPLATE_UNUSED_DAYS. A template never recorded (made before this rule) starts its clock now.
 * Call under the template lock, so no run is creating or migrating one meanwhile.
 */
export async function dropUnusedTemplates(
  client: pg.Client,
  template: string,
  now = new Date(),
): Promise<string[]> {
  await client.query(
    `comment on database ${pg.escapeIdentifier(template)} is ${sqlLiteral(USED + now.toISOString())}`,
  );
  const { rows } = await client.query<{ name: string; note: string | null }>(
    `select datname as name, shobj_description(oid, 'pg_database') as note
       from pg_database where starts_with(datname, $1) and datname <> $2`,
    [TEMPLATE_PREFIX, template],
  );
  const dropped: string[] = [];
  for (const { name, note } of rows) {
    const used = note?.startsWith(USED) ? Date.parse(note.slice(USED.length)) : Number.NaN;
    if (Number.isNaN(used)) {
      await client.query(
        `comment on database ${pg.escapeIdentifier(name)} is ${sqlLiteral(USED + now.toISOString())}`,
      );
    } else if (now.getTime() - used > TEMPLATE_UNUSED_DAYS * 86_400_000) {
      // Without force: a template someone is connected to (creating from it) stays for next time.
      const gone = await client.query(`drop database ${pg.escapeIdentifier(name)}`).then(
        () => true,
        () => false,
      );
      if (gone) dropped.push(name);
    }
  }
  return dropped;
}
