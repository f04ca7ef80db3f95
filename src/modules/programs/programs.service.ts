import type { z } from 'zod';
import type { Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { pageFrom } from '../../shared/paging.js';
import { notifyAuthChanged } from '../keys/keys.service.js';
import { backfillCreatorMonths } from './creator-months.js';
import {
  canonicalRules,
  checkRules,
  checkTimeZone,
  DEFAULT_TIME_ZONE,
  type ProgramRules,
  type ProgramVersionCreate,
  type ProgramVersionOut,
  type ProgramVersionPatch,
} from './programs.schemas.js';

/** How far in the past `effective_from` may lie: the caller's clock may be behind ours. */
export const PUBLISH_CLOCK_SKEW_MS = 60_000;

export interface ProgramVersion {
  id: string;
  brandId: string;
  number: number;
  status: 'draft' | 'published';
  note: string | null;
  timeZone: string;
  rules: ProgramRules;
  effectiveFrom: Date | null;
  createdAt: Date;
  publishedAt: Date | null;
}

/** A published version: what pricing picks from. */
export type PublishedVersion = ProgramVersion & {
  status: 'published';
  effectiveFrom: Date;
  publishedAt: Date;
};

interface VersionRow {
  id: string;
  brand_id: string;
  number: number;
  status: 'draft' | 'published';
  note: string | null;
  time_zone: string;
  rules: ProgramRules;
  effective_from: Instant | null;
  created_at: Instant;
  published_at: Instant | null;
}

/** Raw SQL gives timestamptz as PostgreSQL's text (db/timestamps.ts). */
type Instant = Date | string;
const instant = (v: Instant): Date => new Date(v);

const columns = `id, brand_id, number, status, note, time_zone, rules, effective_from, created_at, published_at`;

function fromRow(row: VersionRow): ProgramVersion {
  return {
    id: row.id,
    brandId: row.brand_id,
    number: row.number,
    status: row.status,
    note: row.note,
    timeZone: row.time_zone,
    rules: canonicalRules(row.rules),
    effectiveFrom: row.effective_from === null ? null : instant(row.effective_from),
    createdAt: instant(row.created_at),
    publishedAt: row.published_at === null ? null : instant(row.published_at),
  };
}

export function toVersionOut(v: ProgramVersion): z.input<typeof ProgramVersionOut> {
  return {
    id: v.id,
    object: 'commission_program_version',
    brand_id: v.brandId,
    number: v.number,
    status: v.status,
    note: v.note,
    time_zone: v.timeZone,
    rules: v.rules,
    effective_from: v.effectiveFrom?.toISOString() ?? null,
    created_at: v.createdAt.toISOString(),
    published_at: v.publishedAt?.toISOString() ?? null,
  };
}

function versionNotFound(id: string): AppError {
  return new AppError(
    'commission_program_version_not_found',
    `No commission program version '${id}' belongs to this brand.`,
    {
      hint: 'List the brand’s versions (GET /admin/api/brands/{brand_id}/commission_program/versions) for their ids.',
    },
  );
}

function notDraft(v: ProgramVersion, doing: string): AppError {
  return new AppError(
    'version_not_draft',
    `Version ${v.number} (${v.id}) is published (in force from ${v.effectiveFrom?.toISOString()}) and cannot be ${doing}.`,
    {
      hint: 'A published version never changes: create a new version with the rules you want and publish it.',
    },
  );
}

/**
 * The brand's row, locked against another create or publish of its program until commit: numbers
 * and effective instants are then given one transaction at a time. `no key update`: the brand's
 * orders and other rows that reference it (a key share lock each) are not held up by it.
 */
async function lockBrand(sql: Sql, brandId: string, unknown: () => AppError): Promise<void> {
  const found = await sql.query('select id from brands where id = ? for no key update', [brandId]);
  if (found.length === 0) throw unknown();
}

const brandNotFound = (brandId: string) => () =>
  new AppError('brand_not_found', `No brand has the id '${brandId}'.`);

/** A new draft numbered after the brand's last version. */
export async function createVersion(
  sql: Sql,
  brandId: string,
  input: z.output<typeof ProgramVersionCreate>,
): Promise<ProgramVersion> {
  checkRules(input.rules);
  const timeZone = input.time_zone === undefined ? DEFAULT_TIME_ZONE : checkTimeZone(input.time_zone);
  await lockBrand(sql, brandId, brandNotFound(brandId));
  const [row] = await sql.query<VersionRow>(
    `insert into commission_program_versions (brand_id, id, number, note, time_zone, rules)
     select ?, ?, coalesce(max(number), 0) + 1, ?, ?, ?::jsonb from commission_program_versions where brand_id = ?
     returning ${columns}`,
    [
      brandId,
      newId('cpv'),
      input.note ?? null,
      timeZone,
      JSON.stringify(canonicalRules(input.rules)),
      brandId,
    ],
  );
  return fromRow(row!);
}

export async function getVersion(sql: Sql, brandId: string, versionId: string): Promise<ProgramVersion> {
  const [row] = await sql.query<VersionRow>(
    `select ${columns} from commission_program_versions where brand_id = ? and id = ?`,
    [brandId, versionId],
  );
  if (!row) throw versionNotFound(versionId);
  return fromRow(row);
}

/** Newest first: one page of `limit` after the version numbered `before` (if given). */
export async function listVersions(
  sql: Sql,
  brandId: string,
  page: { limit: number; before?: number },
): Promise<{ data: ProgramVersion[]; hasMore: boolean; last: ProgramVersion | undefined }> {
  const [brand] = await sql.query('select id from brands where id = ?', [brandId]);
  if (!brand) throw brandNotFound(brandId)();
  const rows = await sql.query<VersionRow>(
    `select ${columns} from commission_program_versions
      where brand_id = ? and number < ? order by number desc limit ?`,
    [brandId, page.before ?? 2_147_483_647, page.limit + 1],
  );
  const { page: shown, hasMore, last } = pageFrom(rows.map(fromRow), page.limit);
  return { data: shown, hasMore, last };
}

/** Changes a draft; a published version is refused whatever the patch (409 `version_not_draft`). */
export async function updateVersion(
  sql: Sql,
  brandId: string,
  versionId: string,
  patch: z.output<typeof ProgramVersionPatch>,
): Promise<ProgramVersion> {
  if (patch.rules) checkRules(patch.rules);
  const timeZone = patch.time_zone === undefined ? undefined : checkTimeZone(patch.time_zone);
  // `status = 'draft'` is read again after a publish this waited for: a publish that committed
  // first leaves nothing to update.
  const [row] = await sql.query<VersionRow>(
    `update commission_program_versions
        set rules = coalesce(?::jsonb, rules), time_zone = coalesce(?::text, time_zone),
            note = case when ?::boolean then ?::text else note end, updated_at = now()
      where brand_id = ? and id = ? and status = 'draft'
      returning ${columns}`,
    [
      patch.rules ? JSON.stringify(canonicalRules(patch.rules)) : null,
      timeZone ?? null,
      patch.note !== undefined,
      patch.note ?? null,
      brandId,
      versionId,
    ],
  );
  if (row) return fromRow(row);
  throw notDraft(await getVersion(sql, brandId, versionId), 'changed');
}

/**
 * Publishes a draft to come into force at `effectiveFrom`: at or after `now` (less the clock
 * skew allowed), and after every published version of the brand. Under the brand's lock, so two
 * publishes are checked one after the other.
 */
export async function publishVersion(
  sql: Sql,
  brandId: string,
  versionId: string,
  effectiveFrom: Date,
  now: Date = new Date(),
): Promise<ProgramVersion> {
  // An unknown brand has no version of that id either.
  await lockBrand(sql, brandId, () => versionNotFound(versionId));
  const version = await getVersion(sql, brandId, versionId);
  if (version.status !== 'draft') throw notDraft(version, 'published again');
  if (effectiveFrom.getTime() < now.getTime() - PUBLISH_CLOCK_SKEW_MS)
    throw new AppError(
      'effective_from_in_past',
      `effective_from ${effectiveFrom.toISOString()} is in the past (now is ${now.toISOString()}).`,
      {
        param: 'effective_from',
        hint: 'A version cannot rewrite what was priced: give now or a later instant (60 s of clock skew are allowed).',
      },
    );
  const [latest] = await sql.query<{ effective_from: Instant | null }>(
    `select max(effective_from) as effective_from from commission_program_versions
      where brand_id = ? and status = 'published'`,
    [brandId],
  );
  const after = latest?.effective_from ? instant(latest.effective_from) : undefined;
  if (after && effectiveFrom.getTime() <= after.getTime())
    throw new AppError(
      'effective_from_not_after_latest',
      `effective_from ${effectiveFrom.toISOString()} is not after ${after.toISOString()}, when the brand's latest published version takes effect.`,
      { param: 'effective_from', hint: `Give an instant after ${after.toISOString()}.` },
    );
  const [row] = await sql.query<VersionRow>(
    `update commission_program_versions
        set status = ?, effective_from = ?, published_at = now(), updated_at = now()
      where brand_id = ? and id = ? and status = 'draft'
      returning ${columns}`,
    ['published', effectiveFrom, brandId, versionId],
  );
  const published = fromRow(row!);
  // Read with the brand's keys (and cached with them): its groups load versions from now on.
  const [marked] = await sql.query<{ id: string }>(
    'update brands set has_commission_program = true where id = ? and not has_commission_program returning id',
    [brandId],
  );
  if (marked) await notifyAuthChanged(sql, brandId);
  if (published.rules.caps?.per_creator_month != null)
    await backfillCreatorMonths(sql, brandId, published.timeZone);
  return published;
}

/** The brand's published versions, in the order they take effect: the engine picks from them. */
export async function versionsInForce(sql: Sql, brandId: string): Promise<PublishedVersion[]> {
  const rows = await sql.query<VersionRow>(
    `select ${columns} from commission_program_versions
      where brand_id = ? and status = 'published' order by effective_from`,
    [brandId],
  );
  return rows.map(fromRow) as PublishedVersion[];
}

/**
 * The version in force at `at`: the published one with the latest `effective_from` at or before
 * it; undefined before the first (no program: today's rules). `versions` in effective order.
 */
export function versionInForceAt<V extends { effectiveFrom: Date }>(
  versions: readonly V[],
  at: Date,
): V | undefined {
  let found: V | undefined;
  for (const v of versions) {
    if (v.effectiveFrom.getTime() > at.getTime()) break;
    found = v;
  }
  return found;
}

/** What `GET /v1/commission_program` shows: the version in force now and the next one, if any. */
export async function currentProgram(
  sql: Sql,
  brandId: string,
  now: Date = new Date(),
): Promise<{ current: PublishedVersion | undefined; next: PublishedVersion | undefined }> {
  const versions = await versionsInForce(sql, brandId);
  return {
    current: versionInForceAt(versions, now),
    next: versions.find((v) => v.effectiveFrom.getTime() > now.getTime()),
  };
}
