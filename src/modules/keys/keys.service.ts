import { hash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { queryOnce, type Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import { newId, randomToken } from '../../shared/ids.js';
import type { BrandStatus } from '../brands/brand.entity.js';
import type { KeyKind } from './api-key.entity.js';

const KEY_PATTERN = /^(sk|pk)_(live|test)_[0-9A-Za-z]{32}$/;

/** What every web process's key cache LISTENs on (key-cache.ts); the payload is the brand id. */
export const AUTH_CHANGED_CHANNEL = 'lf_auth_changed';

/**
 * Tells every key cache, when the caller's transaction commits, that the brand's keys or
 * settings changed. Sent by the writers themselves: on Citus a trigger would fire on the node
 * holding the row's shard, where no web process listens (docs/decisions.md, "Citus"). On plain
 * PostgreSQL the triggers still send it too, for changes made elsewhere (psql); PostgreSQL
 * delivers a transaction's identical notifications once.
 */
export async function notifyAuthChanged(
  tx: Pick<EntityManager, 'execute'> | Pick<Sql, 'query'>,
  brandId: string,
): Promise<void> {
  const args = ['select pg_notify(?, ?)', [AUTH_CHANGED_CHANNEL, brandId]] as const;
  await ('execute' in tx ? tx.execute(...args) : tx.query(...args));
}

/**
 * This process's key caches, told at once of a brand change it committed outside the ORM's
 * transactions (which clear them on commit themselves): its NOTIFY comes back a moment later, and
 * the writing request's caller may ask again before it does.
 */
export const authChangedHere = new EventEmitter<{ changed: [] }>();

export interface KeyPair {
  secret_key: string;
  publishable_key: string;
}

export interface AuthenticatedKey {
  keyId: string;
  brandId: string;
  brandName: string;
  brandStatus: BrandStatus;
  platform: string;
  allowedOrigins: string[];
  rateLimitPerS: number | null;
  rateLimitBurst: number | null;
  /** Settlement terms, read with the key so ingestion needs no extra query. */
  confirmPeriodDays: number;
  recurringCommissionCycles: number | null;
  defaultCommissionBps: number;
  hasCommissionProgram: boolean;
  livemode: boolean;
  kind: KeyKind;
}

/**
 * Keys carry 190 bits of randomness, so a plain SHA-256 is a safe lookup hash (no salt needed).
 * Once per request: the one-shot `hash` costs a fraction of a Hash object's setup.
 */
export function hashKey(plain: string): string {
  return hash('sha256', plain, 'hex');
}

export function newPlainKey(kind: KeyKind, livemode: boolean): string {
  return `${kind === 'secret' ? 'sk' : 'pk'}_${livemode ? 'live' : 'test'}_${randomToken(32)}`;
}

function describeKey(plain: string): { kind: KeyKind; livemode: boolean } | undefined {
  const m = KEY_PATTERN.exec(plain);
  if (!m) return undefined;
  return { kind: m[1] === 'sk' ? 'secret' : 'publishable', livemode: m[2] === 'live' };
}

/** One indexed join: the key, its brand and the brand's settlement terms (cached per process by KeyCache). */
export const keyLookupSql = `select k.id, k.brand_id, k.livemode, k.kind, k.revoked_at, b.name, b.status, b.platform, b.allowed_origins, b.rate_limit_per_s, b.rate_limit_burst,
            b.confirm_period_days, b.recurring_commission_cycles, b.default_commission_bps, b.has_commission_program
       from api_keys k join brands b on b.id = k.brand_id
      where k.secret_hash = ?`;

/** A row of `keyLookupSql`. */
export type KeyRow = Record<string, unknown>;

/** Finds the `keyLookupSql` row of a key hash: `readKey(orm)` uncached, or `KeyCache.lookup`. */
export type KeyLookup = (secretHash: string) => Promise<KeyRow | undefined>;

/** The uncached read: one prepared statement on the ORM's pool. */
export function readKey(orm: MikroORM): KeyLookup {
  return async (secretHash) => (await queryOnce(orm, keyLookupSql, [secretHash]))[0];
}

/**
 * Resolves `Authorization: Bearer <key>` to its brand, or throws 401/403 as api-v1.md says.
 * Given an ORM instead of a lookup, it reads uncached (the bench captures that statement).
 */
export async function authenticateKey(
  lookup: KeyLookup,
  header: string | undefined,
): Promise<AuthenticatedKey> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) {
    throw new AppError(
      'invalid_api_key',
      header ? 'The Authorization header is malformed.' : 'No API key was sent.',
      { hint: 'Send the header `Authorization: Bearer <your sk_ or pk_ key>`.' },
    );
  }
  const plain = match[1]!;
  if (!describeKey(plain)) {
    throw new AppError('invalid_api_key', 'The API key is malformed.', {
      hint: 'Keys look like sk_live_ (or sk_test_, pk_live_, pk_test_) followed by 32 letters and digits; copy it again in full.',
    });
  }
  const row = await lookup(hashKey(plain));
  if (!row)
    throw new AppError('invalid_api_key', 'The API key is not recognised.', {
      hint: 'Check that you copied the whole key, or issue a new one.',
    });
  if (row.revoked_at) {
    throw new AppError('invalid_api_key', 'The API key has been revoked.', {
      hint: 'Use the key issued most recently for this mode.',
    });
  }
  const status = row.status as BrandStatus;
  if (status !== 'active') {
    throw new AppError(
      'brand_not_active',
      `The brand's account is ${status.replaceAll('_', ' ')}; events are not accepted.`,
      {
        hint: 'Contact support to reactivate the account.',
      },
    );
  }
  return {
    keyId: row.id as string,
    brandId: row.brand_id as string,
    brandName: row.name as string,
    brandStatus: status,
    platform: row.platform as string,
    allowedOrigins: row.allowed_origins as string[],
    rateLimitPerS: (row.rate_limit_per_s as number | null) ?? null,
    rateLimitBurst: (row.rate_limit_burst as number | null) ?? null,
    confirmPeriodDays: row.confirm_period_days as number,
    recurringCommissionCycles: (row.recurring_commission_cycles as number | null) ?? null,
    defaultCommissionBps: row.default_commission_bps as number,
    hasCommissionProgram: row.has_commission_program === true,
    livemode: row.livemode as boolean,
    kind: row.kind as KeyKind,
  };
}

/**
 * Makes `keys` the brand's only active keys of that mode: earlier keys of the mode are
 * revoked in the same transaction, under a lock on the brand row so that two reissues
 * cannot interleave. Re-installing a revoked key (the demo seed) reactivates it.
 */
export async function installKeys(
  em: EntityManager,
  brandId: string,
  livemode: boolean,
  keys: KeyPair,
): Promise<{ secret_key_id: string; publishable_key_id: string }> {
  return em.transactional(async (tx) => {
    const brand = await tx.execute('select id from brands where id = ? for update', [brandId]);
    if (brand.length === 0) throw new AppError('brand_not_found', `No brand has the id '${brandId}'.`);
    await notifyAuthChanged(tx, brandId);
    const hashes = [hashKey(keys.secret_key), hashKey(keys.publishable_key)];
    await tx.execute(
      'update api_keys set revoked_at = now() where brand_id = ? and livemode = ? and revoked_at is null and secret_hash not in (?, ?)',
      [brandId, livemode, ...hashes],
    );
    const ids: string[] = [];
    for (const [kind, plain] of [
      ['secret', keys.secret_key],
      ['publishable', keys.publishable_key],
    ] as const) {
      const [row] = await tx.execute<{ id: string }[]>(
        `insert into api_keys (id, brand_id, livemode, kind, display_prefix, secret_hash)
         values (?, ?, ?, ?, ?, ?)
         on conflict (secret_hash) do update set revoked_at = null
         returning id`,
        [newId('key'), brandId, livemode, kind, plain.slice(0, 12), hashKey(plain)],
      );
      ids.push(row!.id);
    }
    return { secret_key_id: ids[0]!, publishable_key_id: ids[1]! };
  });
}

/** Issues a fresh secret and publishable key for one mode; the plain text leaves only here. */
export async function issueKeys(em: EntityManager, brandId: string, livemode: boolean) {
  const keys = {
    secret_key: newPlainKey('secret', livemode),
    publishable_key: newPlainKey('publishable', livemode),
  };
  return { ...keys, ...(await installKeys(em, brandId, livemode, keys)) };
}
