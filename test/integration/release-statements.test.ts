import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { brandShardsFunction } from '../../src/db/fast-path/brand-shards.js';
import {
  installReleaseStatements,
  missingReleaseStatements,
  releaseStatements,
} from '../../src/db/stored-statements.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 37: the stored statements the service calls are created by migrations (`npm run migrate`,
 * db/orm.ts `migrateUp`), not by the web process, and on Citus those that name one brand are
 * distributed by it, co-located with the brand tables and force-delegated, so a call runs on the
 * brand's worker inside the group's transaction. A database that lacks one (the release's
 * migrate not run) fails the request with a message saying what to run, and the process goes on
 * once it has run.
 */
const onCitus = inject('citusUrl') !== undefined;

let ctx: TestContext;
let pool: pg.Pool;
let shop: Awaited<ReturnType<typeof makeShop>>;

beforeAll(async () => {
  ctx = await createTestApp();
  pool = new pg.Pool({ connectionString: ctx.directDatabaseUrl, max: 1 });
  shop = await makeShop(ctx);
});
afterAll(async () => {
  await pool?.end();
  await ctx?.close();
});

const signature = (s: (typeof releaseStatements)[number]) => `${s.name}(${s.types.join(', ')})`;

describe("the release's stored statements", () => {
  it('are there once migrated, and installing again creates and distributes nothing', async () => {
    expect(await missingReleaseStatements(pool)).toEqual([]);
    expect(await installReleaseStatements(ctx.directDatabaseUrl)).toEqual({ created: [], distributed: [] });
    // Each write shape twice (plain, and brand first for Citus), the load's forms once each.
    expect(releaseStatements.filter((s) => s.brandArgument !== undefined).length).toBeGreaterThan(0);
  });

  it.runIf(onCitus)(
    'on Citus: those named by a brand are distributed by it, co-located with the brand tables, force-delegated',
    async () => {
      const { rows } = await pool.query<{ name: string; arg: number; colocated: boolean; forced: boolean }>(
        `select p.proname as name, d.distribution_argument_index as arg, d.force_delegation as forced,
                d.colocationid = (select colocationid from pg_dist_partition where logicalrelid = 'creators'::regclass) as colocated
           from pg_dist_object d join pg_proc p on p.oid = d.objid
          where d.classid = 'pg_proc'::regclass and p.proname = any($1::text[])`,
        [releaseStatements.map((s) => s.name)],
      );
      const byBrand = releaseStatements.filter((s) => s.brandArgument !== undefined);
      for (const s of byBrand)
        expect(
          rows.find((r) => r.name === s.name),
          s.name,
        ).toEqual({
          name: s.name,
          arg: s.brandArgument! - 1,
          colocated: true,
          forced: true,
        });
    },
  );

  it("count the brand shards' helper their brand's functions call: dropped, it is missing until migrate makes it again", async () => {
    await pool.query(`drop function ${brandShardsFunction.procedure}`);
    expect(await missingReleaseStatements(pool)).toEqual([brandShardsFunction.name]);
    const again = await installReleaseStatements(ctx.directDatabaseUrl);
    expect(again.created).toEqual([brandShardsFunction.name]);
    // On Citus it is on every worker again, where the brand's functions call it.
    if (onCitus) {
      const { rows } = await pool.query<{ result: string }>(
        `select result from run_command_on_workers($$select to_regprocedure('${brandShardsFunction.procedure}') is not null$$)`,
      );
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) expect(r.result).toBe('t');
    }
    expect(await missingReleaseStatements(pool)).toEqual([]);
  });

  it('are never created by the web process: a missing one answers 503 (retryable), its log line naming npm run migrate', async () => {
    for (const s of releaseStatements) await pool.query(`drop function ${signature(s)}`);
    const refused = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
      order_id: 'rs-1',
      amount: 1_000,
    });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: 'temporary_service_error' });
    expect(ctx.logLines.join('\n')).toMatch(
      /lacks \d+ stored statement\(s\) of this release .*run npm run migrate/,
    );
    const ready = await request(ctx.app).get('/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.checks.schema).toBe('not_migrated');
    expect(ready.body.message).toMatch(/stored statement\(s\) of this code .*run npm run migrate/);
    // Still missing: the request created none (the brand shards' helper stayed: not dropped).
    expect((await missingReleaseStatements(pool)).length).toBe(releaseStatements.length);
    // What npm run migrate does last; the same process then goes on.
    expect((await installReleaseStatements(ctx.directDatabaseUrl)).created.length).toBe(
      releaseStatements.length,
    );
    const sent = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
      order_id: 'rs-1',
      amount: 1_000,
    });
    expect(sent.status).toBe(200);
    expect((await request(ctx.app).get('/readyz')).body.checks.schema).toBe('migrated');
  });
});
