import { z } from 'zod';
import type { Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { text } from '../../shared/text.js';
import type { TierChangeObject } from '../webhooks/event-types.js';
import { recordWebhookEvents } from '../webhooks/webhook-writes.js';
import { versionInForceAt, versionsInForce } from './programs.service.js';

/** A creator's tier as the creator object shows it; null: no tier and not locked. */
export const CreatorTierOut = z
  .object({
    key: z
      .string()
      .nullable()
      .meta({ description: 'The level key of the version in force; null: locked at no tier.' }),
    since: z.iso.datetime().meta({ description: 'When the creator reached this level (or lost its last).' }),
    locked: z.boolean().meta({ description: 'Set by ops: the daily tier job leaves a locked tier alone.' }),
  })
  .meta({ id: 'CreatorTier' });
export type CreatorTier = z.output<typeof CreatorTierOut>;

export const CreatorTierSet = z
  .strictObject({
    level: text()
      .max(40)
      .nullable()
      .meta({ description: 'A level key of the version in force, or null for no tier.' }),
    locked: z.boolean().meta({ description: 'true: the daily tier job leaves this tier alone.' }),
  })
  .meta({ id: 'CreatorTierSet' });

export const CreatorTierResult = z
  .object({
    object: z.literal('creator_tier'),
    creator_id: z.string(),
    tier: CreatorTierOut.nullable(),
  })
  .meta({ id: 'CreatorTierResult' });

interface TierRow {
  creator_id: string;
  level: string | null;
  locked: boolean;
  since: Date | string;
}

function toTier(row: TierRow | undefined): CreatorTier | null {
  if (!row || (row.level === null && !row.locked)) return null;
  return { key: row.level, since: new Date(row.since).toISOString(), locked: row.locked };
}

type Execute = <R>(text: string, values: unknown[]) => Promise<R[]>;

/** The tiers in force at `at` of some of the brand's creators, by creator id (absent: no tier). */
export async function tiersAt(
  execute: Execute,
  brandId: string,
  creatorIds: readonly string[],
  at: Date = new Date(),
): Promise<Map<string, CreatorTier | null>> {
  if (creatorIds.length === 0) return new Map();
  const rows = await execute<TierRow>(
    `select distinct on (creator_id) creator_id, level, locked, since from creator_tiers
      where brand_id = ? and creator_id in (select jsonb_array_elements_text(?::jsonb)) and effective_at <= ?
      order by creator_id, effective_at desc, id desc`,
    [brandId, JSON.stringify(creatorIds), at],
  );
  return new Map(rows.map((r) => [r.creator_id, toTier(r)]));
}

/** The level key of a creator's tier in force at `at` (pricing: the order's `occurred_at`); null for none. */
export async function creatorTierAt(
  sql: Sql,
  brandId: string,
  creatorId: string,
  at: Date,
): Promise<string | null> {
  const [row] = await sql.query<TierRow>(
    `select creator_id, level, locked, since from creator_tiers
      where brand_id = ? and creator_id = ? and effective_at <= ?
      order by effective_at desc, id desc limit 1`,
    [brandId, creatorId, at],
  );
  return row?.level ?? null;
}

/**
 * Sets a creator's tier from `now` on, as ops ask (`PUT …/creators/{creator_id}/tier`): a level
 * of the version in force (422 `unknown_tier_level` otherwise), or none. Under a lock on the
 * creator's row, so changes of one creator are ordered. A change of level sends
 * `creator.tier_changed` to the brand's live endpoints; the same level and lock again write nothing.
 */
export async function setCreatorTier(
  sql: Sql,
  brandId: string,
  creatorId: string,
  input: z.output<typeof CreatorTierSet>,
  requestId: string,
  now: Date = new Date(),
): Promise<CreatorTier | null> {
  const creator = await sql.query('select id from creators where brand_id = ? and id = ? for no key update', [
    brandId,
    creatorId,
  ]);
  if (creator.length === 0)
    throw new AppError('creator_not_found', `The brand has no creator '${creatorId}'.`, {
      hint: 'Use a creator id of this brand (POST /admin/api/brands/{brand_id}/creators made it).',
    });
  const version = versionInForceAt(await versionsInForce(sql, brandId), now);
  const tiers = version?.rules.tiers ?? null;
  if (input.level !== null && !tiers?.levels.some((l) => l.key === input.level)) {
    const known = tiers?.levels.map((l) => l.key) ?? [];
    throw new AppError(
      'unknown_tier_level',
      `The commission program version in force has no tier level '${input.level}'.`,
      {
        param: 'level',
        hint: known.length
          ? `Use one of ${known.join(', ')}, or null for no tier.`
          : 'The version in force has no tiers (or none is in force): publish one with tiers first, or send null.',
      },
    );
  }
  const [current] = await sql.query<TierRow & { effective_at: Date | string }>(
    `select creator_id, level, locked, since, effective_at from creator_tiers
      where brand_id = ? and creator_id = ? order by effective_at desc, id desc limit 1`,
    [brandId, creatorId],
  );
  const from = current?.level ?? null;
  if (current && from === input.level && current.locked === input.locked) return toTier(current);
  // Never before the creator's last change: its history stays in order whatever the clocks say.
  const at = current && new Date(current.effective_at) > now ? new Date(current.effective_at) : now;
  const since = current && from === input.level ? new Date(current.since) : at;
  await sql.query(
    `insert into creator_tiers (brand_id, id, creator_id, effective_at, level, locked, since, net_revenue, request_id)
     values (?, ?, ?, ?, ?, ?, ?, null, ?)`,
    [brandId, newId('ctr'), creatorId, at, input.level, input.locked, since, requestId],
  );
  if (from !== input.level)
    await recordWebhookEvents(
      sql,
      [
        {
          brandId,
          livemode: true,
          type: 'creator.tier_changed',
          requestId,
          data: {
            object: {
              object: 'creator_tier_change',
              livemode: true,
              creator_id: creatorId,
              from,
              to: input.level,
              net_revenue: null,
              window_days: tiers?.window_days ?? null,
              effective_at: at.toISOString(),
            } satisfies z.input<typeof TierChangeObject>,
          },
        },
      ],
      now,
    );
  return toTier({ creator_id: creatorId, level: input.level, locked: input.locked, since });
}
