import type { z } from 'zod';
import { inTransaction } from '../../db/fast-path/index.js';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route, secretKeyRequired } from '../../http/route.js';
import { CommissionProgramOut, programVersionExample } from './programs.schemas.js';
import { currentProgram, toVersionOut } from './programs.service.js';

/** Commission terms are the brand's business: read from its server, never with a browser's key. */
const secretKeyForProgram = secretKeyRequired('The commission program can only be read');

export function programRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/commission_program',
      operationId: 'getCommissionProgram',
      summary: 'Read the commission program in force',
      description:
        "The brand's published commission program version in force now (`current`; null before the first takes effect: each order then earns its offer's or the brand's rate) and the one scheduled to take effect next (`next`), if any. Drafts are never shown. An order is priced with the version in force at its `occurred_at`, which stays pinned to it for every resend (the order's `commission_program_version`). The same for both modes.",
      tag: 'Commission program',
      security: 'secret_key',
      refusePublishableKey: secretKeyForProgram,
      responses: {
        200: {
          description: 'The program now and next.',
          schema: CommissionProgramOut,
          example: { object: 'commission_program', current: programVersionExample, next: null },
        },
      },
      errors: ['invalid_api_key', 'brand_not_active', 'secret_key_required'],
      async handle(req, res) {
        const { brandId } = callerOf(req);
        const { current, next } = await inTransaction(orm, (sql) => currentProgram(sql, brandId));
        res.json({
          object: 'commission_program',
          current: current ? toVersionOut(current) : null,
          next: next ? toVersionOut(next) : null,
        } satisfies z.input<typeof CommissionProgramOut>);
      },
    }),
  ];
}
