import type { MikroORM } from '@mikro-orm/postgresql';

const known = new WeakMap<MikroORM, Promise<boolean>>();

/**
 * Whether the database is a Citus coordinator (the extension is there: docs/scale-out.md), asked
 * once per ORM. Work that reads or locks across brands takes another form there: one brand at a
 * time, as a locking read spread over shards is refused.
 */
export function onCitus(orm: MikroORM): Promise<boolean> {
  let found = known.get(orm);
  if (!found) {
    found = orm.em
      .fork()
      .execute<{ citus: boolean }[]>(
        `select exists (select 1 from pg_extension where extname = 'citus') as citus`,
      )
      .then((rows) => rows[0]!.citus);
    // A failure is asked again next time.
    found.catch(() => known.delete(orm));
    known.set(orm, found);
  }
  return found;
}
