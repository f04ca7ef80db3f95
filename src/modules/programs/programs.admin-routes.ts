import { z } from 'zod';
import { inTransaction } from '../../db/fast-path/index.js';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { signedCursor } from '../../shared/signed-cursor.js';
import { text } from '../../shared/text.js';
import { authChangedHere } from '../keys/keys.service.js';
import { CreatorTierResult, CreatorTierSet, setCreatorTier } from './creator-tiers.js';
import {
  ProgramVersionCreate,
  ProgramVersionList,
  ProgramVersionListQuery,
  ProgramVersionOut,
  ProgramVersionParams,
  ProgramVersionPatch,
  ProgramVersionPublish,
  ProgramVersionsParams,
  programVersionBodyExample,
  programVersionExample,
} from './programs.schemas.js';
import {
  createVersion,
  getVersion,
  listVersions,
  publishVersion,
  toVersionOut,
  updateVersion,
} from './programs.service.js';

/** A page continues below the last version number shown. */
const versionCursor = signedCursor('commission program versions', z.int(), 'parameters');

const draftExample = {
  ...programVersionExample,
  status: 'draft',
  effective_from: null,
  published_at: null,
} satisfies z.input<typeof ProgramVersionOut>;

const CreatorTierParams = z.strictObject({ brand_id: text().max(40), creator_id: text().max(255) });

/** Ops manage a brand's commission program: versions drafted, changed, then published for good. */
export function programAdminRoutes({ orm, config }: AppDeps) {
  const tag = 'Admin: commission program';
  const base = '/admin/api/brands/{brand_id}/commission_program/versions';
  const rulesErrors = [
    'invalid_request_body',
    'duplicate_product_rule',
    'overlapping_tiers',
    'invalid_time_zone',
  ] as const;
  return [
    route({
      method: 'post',
      path: base,
      operationId: 'adminCreateCommissionProgramVersion',
      summary: 'Draft a commission program version',
      description:
        'A new draft numbered after the brand’s last version (1, 2, …). Nothing is priced with it until it is published. `rules` refuses unknown fields at every level; omitted fields take their defaults (no program default rate, no product rates, no tiers, no caps).',
      tag,
      security: 'admin',
      params: ProgramVersionsParams,
      body: ProgramVersionCreate,
      bodyExample: programVersionBodyExample,
      responses: { 201: { description: 'The draft.', schema: ProgramVersionOut, example: draftExample } },
      errors: ['invalid_admin_token', 'brand_not_found', ...rulesErrors],
      async handle(_req, res, { params, body }) {
        const version = await inTransaction(orm, (sql) => createVersion(sql, params.brand_id, body));
        res.status(201).json(toVersionOut(version));
      },
    }),
    route({
      method: 'get',
      path: base,
      operationId: 'adminListCommissionProgramVersions',
      summary: 'List a brand’s commission program versions',
      description: 'Newest first (by number), drafts and published ones, paged by a signed cursor.',
      tag,
      security: 'admin',
      params: ProgramVersionsParams,
      query: ProgramVersionListQuery,
      responses: {
        200: {
          description: 'One page of versions.',
          schema: ProgramVersionList,
          example: { object: 'list', data: [programVersionExample], has_more: false, next_cursor: null },
        },
      },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_cursor', 'invalid_request_body'],
      async handle(_req, res, { params, query }) {
        const scope = { brandId: params.brand_id, livemode: true, filters: {} };
        const before = query.cursor
          ? versionCursor.decode(config.SECRET_KEY_BASE, query.cursor, scope)
          : undefined;
        const page = await inTransaction(orm, (sql) =>
          listVersions(sql, params.brand_id, { limit: query.limit, ...(before !== undefined && { before }) }),
        );
        res.json({
          object: 'list',
          data: page.data.map(toVersionOut),
          has_more: page.hasMore,
          next_cursor: page.last
            ? versionCursor.encode(config.SECRET_KEY_BASE, scope, page.last.number)
            : null,
        } satisfies z.input<typeof ProgramVersionList>);
      },
    }),
    route({
      method: 'get',
      path: `${base}/{version_id}`,
      operationId: 'adminGetCommissionProgramVersion',
      summary: 'Read a commission program version',
      tag,
      security: 'admin',
      params: ProgramVersionParams,
      responses: {
        200: { description: 'The version.', schema: ProgramVersionOut, example: programVersionExample },
      },
      errors: ['invalid_admin_token', 'commission_program_version_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        const version = await inTransaction(orm, (sql) =>
          getVersion(sql, params.brand_id, params.version_id),
        );
        res.json(toVersionOut(version));
      },
    }),
    route({
      method: 'patch',
      path: `${base}/{version_id}`,
      operationId: 'adminUpdateCommissionProgramVersion',
      summary: 'Change a draft commission program version',
      description:
        'Any of `rules` (replaced whole), `time_zone` and `note` (null clears it). A published version is immutable: 409 `version_not_draft`, whatever the body.',
      tag,
      security: 'admin',
      params: ProgramVersionParams,
      body: ProgramVersionPatch,
      bodyExample: { note: 'Winter program, draft 2' },
      responses: { 200: { description: 'The draft.', schema: ProgramVersionOut, example: draftExample } },
      errors: [
        'invalid_admin_token',
        'commission_program_version_not_found',
        'version_not_draft',
        ...rulesErrors,
      ],
      async handle(_req, res, { params, body }) {
        const version = await inTransaction(orm, (sql) =>
          updateVersion(sql, params.brand_id, params.version_id, body),
        );
        res.json(toVersionOut(version));
      },
    }),
    route({
      method: 'post',
      path: `${base}/{version_id}/publish`,
      operationId: 'adminPublishCommissionProgramVersion',
      summary: 'Publish a commission program version',
      description:
        'The draft comes into force at `effective_from` (orders are priced with the version in force at their `occurred_at`) and never changes again. `effective_from` must be now or later (60 s of clock skew allowed: 422 `effective_from_in_past`) and after every published version’s (422 `effective_from_not_after_latest`). A version already published: 409 `version_not_draft`.',
      tag,
      security: 'admin',
      params: ProgramVersionParams,
      body: ProgramVersionPublish,
      bodyExample: { effective_from: '2099-12-01T00:00:00+09:00' },
      responses: {
        200: {
          description: 'The published version.',
          schema: ProgramVersionOut,
          example: programVersionExample,
        },
      },
      errors: [
        'invalid_admin_token',
        'commission_program_version_not_found',
        'version_not_draft',
        'invalid_request_body',
        'effective_from_in_past',
        'effective_from_not_after_latest',
      ],
      async handle(_req, res, { params, body }) {
        const version = await inTransaction(orm, (sql) =>
          publishVersion(sql, params.brand_id, params.version_id, new Date(body.effective_from)),
        );
        authChangedHere.emit('changed');
        res.json(toVersionOut(version));
      },
    }),
    route({
      method: 'put',
      path: '/admin/api/brands/{brand_id}/creators/{creator_id}/tier',
      operationId: 'adminSetCreatorTier',
      summary: 'Set a creator’s tier',
      description:
        'From now on: `level` a level key of the commission program version in force (422 `unknown_tier_level` otherwise), or null for no tier; `locked: true` keeps the daily tier job from changing it. A change of level sends `creator.tier_changed` to the brand’s live endpoints; the same level and lock again change nothing.',
      tag,
      security: 'admin',
      params: CreatorTierParams,
      body: CreatorTierSet,
      bodyExample: { level: 'gold', locked: true },
      responses: {
        200: {
          description: 'The creator’s tier now.',
          schema: CreatorTierResult,
          example: {
            object: 'creator_tier',
            creator_id: 'cr_01kc6m0q1w2e3r4t5y6u7i8o9p',
            tier: { key: 'gold', since: '2026-11-28T09:00:00.000Z', locked: true },
          },
        },
      },
      errors: ['invalid_admin_token', 'creator_not_found', 'invalid_request_body', 'unknown_tier_level'],
      async handle(req, res, { params, body }) {
        const tier = await inTransaction(orm, (sql) =>
          setCreatorTier(sql, params.brand_id, params.creator_id, body, req.requestId),
        );
        res.json({ object: 'creator_tier', creator_id: params.creator_id, tier } satisfies z.input<
          typeof CreatorTierResult
        >);
      },
    }),
  ];
}
