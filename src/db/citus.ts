import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { citusInstalled } from './citus-installed.js';

const known = new WeakMap<object, Promise<boolean>>();

/**
 * Whether the database is a Citus coordinator (the extension is there: docs/scale-out.md), asked
 * once per ORM. Work that reads or locks across brands takes another form there: one brand at a
 * time, as a locking read spread over shards is refused.
 */
export function onCitus(orm: MikroORM | EntityManager): Promise<boolean> {
  const em = 'em' in orm ? orm.em : orm;
  // Asked once per driver: an ORM's entity managers (and their forks) share it.
  const driver = em.getDriver();
  let found = known.get(driver);
  if (!found) {
    const fork = em.fork();
    found = citusInstalled((text) => fork.execute(text));
    // A failure is asked again next time.
    found.catch(() => known.delete(driver));
    known.set(driver, found);
  }
  return found;
}

/**
 * The brands cross-brand work visits one by one on Citus: those with rows of `table` matching
 * `where`, read without locks (Citus refuses a locking read spread over shards, and a brand's
 * statement is routed whole to its worker). On plain PostgreSQL `[undefined]`: one pass over
 * every brand, its single statements being faster there. A brand whose rows appear after the
 * read waits for the next run, as rows skipped while locked do.
 */
export async function brandPasses(
  orm: MikroORM | EntityManager,
  table: string,
  where: string,
  params: unknown[] = [],
): Promise<(string | undefined)[]> {
  if (!(await onCitus(orm))) return [undefined];
  const rows = await ('em' in orm ? orm.em : orm)
    .fork()
    .execute<{ brand_id: string }[]>(`select distinct brand_id from ${table} where ${where}`, params);
  return rows.map((r) => r.brand_id);
}
