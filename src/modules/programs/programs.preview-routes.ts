import type { z } from 'zod';
import { inTransaction } from '../../db/fast-path/index.js';
import type { AppDeps } from '../../deps.js';
import { streamCsv, wantsCsv } from '../../http/csv.js';
import { route } from '../../http/route.js';
import { type CommissionPreview, MAX_PREVIEW_DAYS, previewVersion } from './preview.js';
import { PreviewOut, PreviewRequest, previewCsvColumns, previewExample } from './preview.schemas.js';
import { ProgramVersionParams } from './programs.schemas.js';

function toPreviewOut(p: CommissionPreview): z.input<typeof PreviewOut> {
  return {
    object: 'commission_preview',
    version_id: p.versionId,
    from: p.from.toISOString(),
    to: p.to.toISOString(),
    livemode: p.livemode,
    orders: p.orders,
    totals: p.totals,
    creators: p.creators,
  };
}

/** Ops see what a version would pay over a past period before publishing it (nothing is written). */
export function programPreviewRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'post',
      path: '/admin/api/brands/{brand_id}/commission_program/versions/{version_id}/preview',
      operationId: 'adminPreviewCommissionProgramVersion',
      summary: 'Preview a commission program version',
      description: `What the orders of the mode with \`occurred_at\` in [\`from\`, \`to\`) would earn were this version (draft or published) pinned to each, beside what they earn today: closed orders included, the monthly cap's headroom spent in (occurred_at, id) order by the period's orders only. Nothing is written. At most ${MAX_PREVIEW_DAYS} days (422 \`period_too_long\`); \`from\` must be before \`to\` (422 \`invalid_period\`). With \`Accept: text/csv\` the answer is the \`creators\` as CSV.`,
      tag: 'Admin: commission program',
      security: 'admin',
      params: ProgramVersionParams,
      body: PreviewRequest,
      bodyExample: { from: '2026-11-01T00:00:00+09:00', to: '2026-12-01T00:00:00+09:00', livemode: true },
      csv: {
        columns: previewCsvColumns,
        description: 'One row per creator, the fields and order of `creators` (RFC 4180).',
      },
      responses: {
        200: { description: 'The preview.', schema: PreviewOut, example: previewExample },
      },
      errors: [
        'invalid_admin_token',
        'commission_program_version_not_found',
        'invalid_request_body',
        'invalid_period',
        'period_too_long',
      ],
      async handle(req, res, { params, body }) {
        const preview = await inTransaction(orm, (sql) =>
          previewVersion(sql, params.brand_id, params.version_id, {
            from: new Date(body.from),
            to: new Date(body.to),
            livemode: body.livemode,
          }),
        );
        if (wantsCsv(req))
          return streamCsv(res, 'commission-preview.csv', previewCsvColumns, preview.creators);
        res.json(toPreviewOut(preview));
      },
    }),
  ];
}
