import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countGrains } from '../../src/modules/reports/count-grains.js';
import {
  countsStatement,
  edgesStatement,
  planReadings,
  type Reading,
  type Statement,
} from '../../src/modules/reports/report-readings.js';
import type { ReportQuery } from '../../src/modules/reports/reports.schemas.js';
import { makeBrand } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * A report's two statements run with no planner settings (docs/decisions.md): on a database
 * that was never analyzed, with another brand's rows filling every partition of the counts and
 * the orders table, each must still reach its rows by an index, never by reading a whole table.
 */
let ctx: TestContext;
let caller: { brandId: string; livemode: boolean };

beforeAll(async () => {
  ctx = await createTestApp();
  const sql = (text: string, params: unknown[] = []) => ctx.orm.em.fork().execute(text, params);
  caller = { brandId: (await makeBrand(ctx.orm)).id, livemode: true };
  const other = (await makeBrand(ctx.orm)).id;
  for (const [dim, level] of countGrains) {
    await sql(`alter table conversion_counts_${level}_${dim} set (autovacuum_enabled = false)`);
    await sql(
      `insert into conversion_counts (brand_id, livemode, dim, level, key, bucket_start, orders, attributed_orders,
                                      amount, commission, refunded_amount, reversed_commission)
       select ?, true, ?, ?, 'k' || (g % 500), timestamptz '2024-01-01' + g * interval '15 minutes', 1, 1, 100, 10, 0, 0
         from generate_series(1, 20000) g`,
      [other, dim, level],
    );
  }
  await sql('alter table orders set (autovacuum_enabled = false)');
  await sql(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, refunded_amount,
                         refunded_commission_amount, occurred_at, confirm_at)
     select 'ord_plan_' || g, ?, true, 'P-' || g, 'unattributed', 1000, 0, 0, 0,
            now() - g * interval '1 minute', now()
       from generate_series(1, 30000) g`,
    [other],
  );
}, 60_000);
afterAll(() => ctx?.close());

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}
const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];

async function scans(statement: Statement | undefined): Promise<string[]> {
  expect(statement).toBeDefined();
  const [row] = await ctx.orm.em
    .fork()
    .execute<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(
      `explain (format json) ${statement!.sql}`,
      statement!.params,
    );
  return nodes(row!['QUERY PLAN'][0].Plan)
    .filter((n) => n['Relation Name'] && n['Relation Name'] !== 'conversion_tallies')
    .map((n) => `${n['Node Type']} on ${n['Relation Name']}`);
}

describe('the year report on a never-analyzed database', () => {
  // A year from and to inside quarter hours: every level and both edges are read.
  const to = new Date(Date.now() - 7 * 60_000).toISOString();
  const from = new Date(Date.parse(to) - 365 * 86_400_000).toISOString();
  const cases: [string, Reading[], string | undefined][] = [
    [
      'product',
      [
        { dim: 2, groupBy: 'key' },
        { dim: 0, groupBy: 'all' },
      ],
      undefined,
    ],
    ['creator', [{ dim: 1, groupBy: 'key' }], undefined],
    ['day', [{ dim: 0, groupBy: 'day' }], undefined],
    [
      'product of one creator',
      [
        { dim: 3, key: { prefix: 'cr_x\t' }, groupBy: 'key' },
        { dim: 1, key: { equals: 'cr_x' }, groupBy: 'all' },
      ],
      'cr_x',
    ],
  ];
  for (const [name, readings, creatorId] of cases) {
    it(`by ${name}: every count and order is found by an index`, async () => {
      const query = { from, to, group_by: 'product', time_zone: 'Asia/Seoul' } as ReportQuery;
      const planned = planReadings(readings, query);
      const found = [
        ...(await scans(countsStatement(caller, planned, query.time_zone))),
        ...(await scans(edgesStatement(caller, planned, creatorId))),
      ];
      expect(found.some((s) => s.endsWith('on orders'))).toBe(true);
      expect(found.some((s) => / on conversion_counts_\d_\d$/.test(s))).toBe(true);
      expect(found.filter((s) => !/^Index (Only )?Scan on /.test(s))).toEqual([]);
    });
  }
});
