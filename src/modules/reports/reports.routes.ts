import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { streamCsv, wantsCsv } from '../../http/csv.js';
import { route, secretKeyRequired } from '../../http/route.js';
import { findCreator } from '../creators/creators.read.js';
import { conversionReport } from './reports.read.js';
import { ConversionReport, CreatorRow, DayRow, ProductRow, ReportQuery } from './reports.schemas.js';

const reportCsvColumns = {
  day: Object.keys(DayRow.shape),
  creator: Object.keys(CreatorRow.shape),
  product: Object.keys(ProductRow.shape),
};

const example = {
  object: 'conversion_report',
  livemode: true,
  group_by: 'day',
  from: '2026-11-01T00:00:00.000Z',
  to: '2026-11-02T00:00:00.000Z',
  time_zone: 'Asia/Seoul',
  creator_id: null,
  currency: 'KRW',
  totals: {
    orders: 3,
    attributed_orders: 2,
    amount: 117000,
    commission: 15600,
    refunded_amount: 39000,
    reversed_commission: 7800,
  },
  data: [
    {
      day: '2026-11-01',
      orders: 3,
      attributed_orders: 2,
      amount: 117000,
      commission: 15600,
      refunded_amount: 39000,
      reversed_commission: 7800,
      page_views: 1840,
      product_views: 422,
      cart_additions: 61,
      observed_orders: 3,
    },
  ],
};

export function reportRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/reports/conversions',
      operationId: 'getConversionReport',
      summary: 'Conversions per creator, day or product',
      description:
        "Orders by `occurred_at` in [`from`, `to`) of the key's mode, grouped by creator, by day in `time_zone` (with the browser funnel: page views, product views, cart additions, observed orders) or by item SKU; per group the orders, attributed orders, amount, commission, refunded amount and reversed commission in KRW. Refunds count with their order, whenever they came. Read from running totals kept with the ledger, so a year answers as fast as a day.",
      tag: 'Reports',
      security: 'secret_key',
      refusePublishableKey: secretKeyRequired('Reports can only be read'),
      query: ReportQuery,
      csv: {
        columns: reportCsvColumns.day,
        description:
          'The rows of `data` as CSV, one per group; the columns are those of the grouping (this example: `group_by=day`; `creator`: creator_id, creator_name and the measures; `product`: sku and the measures).',
      },
      responses: { 200: { description: 'The report.', schema: ConversionReport, example } },
      errors: ['invalid_api_key', 'brand_not_active', 'secret_key_required', 'creator_not_found'],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        const em = orm.em.fork();
        if (query.creator_id) await findCreator(em, caller, query.creator_id);
        const report = await conversionReport(em, caller, query);
        if (wantsCsv(req))
          return streamCsv(
            res,
            `conversions-by-${query.group_by}.csv`,
            reportCsvColumns[query.group_by],
            report.data,
          );
        res.json(report);
      },
    }),
  ];
}
