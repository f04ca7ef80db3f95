import { inTransaction } from '../../db/fast-path/index.js';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { ProgramVersionParams } from '../programs/programs.schemas.js';
import {
  MAX_RECALCULATION_DAYS,
  RecalculationOut,
  RecalculationParams,
  RecalculationRequest,
  recalculationExample,
} from './recalculations.schemas.js';
import {
  createRecalculation,
  enqueueRecalculation,
  findRecalculation,
  toRecalculationOut,
} from './recalculations.service.js';

/** Ops pin a period's open orders to a published version (a job), and follow it. */
export function recalculationAdminRoutes({ orm, queues, logger }: AppDeps) {
  const tag = 'Admin: commission program';
  return [
    route({
      method: 'post',
      path: '/admin/api/brands/{brand_id}/commission_program/versions/{version_id}/recalculations',
      operationId: 'adminRecalculateCommissionProgramVersion',
      summary: 'Recalculate a period with a published commission program version',
      description: `Starts a job that pins the orders of the mode with \`occurred_at\` in [\`from\`, \`to\`) to this published version and recomputes their commission in (occurred_at, id) order, as a resend would (the tier in force at each order, the offer's or brand's rate it was first priced with, the monthly headroom the creator's other orders leave). Paid-out, refunded and cancelled orders are left as they are and counted. Each change is an \`adjustment\` in the journal under the recalculation's \`request_id\`, with \`conversion.updated\` to subscribed endpoints. Answers 202 with the recalculation \`running\`; follow it with GET …/commission_program/recalculations/{id}. At most ${MAX_RECALCULATION_DAYS} days (422 \`period_too_long\`); \`from\` before \`to\` (422 \`invalid_period\`); a draft: 409 \`version_not_published\`.`,
      tag,
      security: 'admin',
      params: ProgramVersionParams,
      body: RecalculationRequest,
      bodyExample: { from: '2026-12-01T00:00:00+09:00', to: '2027-01-01T00:00:00+09:00', livemode: true },
      responses: {
        202: {
          description: 'The recalculation, running.',
          schema: RecalculationOut,
          example: recalculationExample,
        },
      },
      errors: [
        'invalid_admin_token',
        'commission_program_version_not_found',
        'version_not_published',
        'invalid_request_body',
        'invalid_period',
        'period_too_long',
      ],
      async handle(req, res, { params, body }) {
        const created = await inTransaction(orm, (sql) =>
          createRecalculation(
            sql,
            params.brand_id,
            params.version_id,
            { from: new Date(body.from), to: new Date(body.to), livemode: body.livemode },
            req.requestId,
          ),
        );
        await enqueueRecalculation({ queues, logger }, created);
        res.status(202).json(toRecalculationOut(created));
      },
    }),
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}/commission_program/recalculations/{recalculation_id}',
      operationId: 'adminGetCommissionRecalculation',
      summary: 'Read a commission recalculation',
      description:
        'Its status and figures so far: the counters move as each chunk of orders commits, so a running one shows its progress.',
      tag,
      security: 'admin',
      params: RecalculationParams,
      responses: {
        200: {
          description: 'The recalculation.',
          schema: RecalculationOut,
          example: { ...recalculationExample, status: 'completed', completed_at: '2026-12-02T01:00:05.000Z' },
        },
      },
      errors: ['invalid_admin_token', 'commission_recalculation_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        const found = await inTransaction(orm, (sql) =>
          findRecalculation(sql, params.brand_id, params.recalculation_id),
        );
        res.json(toRecalculationOut(found));
      },
    }),
  ];
}
