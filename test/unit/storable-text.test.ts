import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { AppDeps } from '../../src/deps.js';
import type { AnyRoute } from '../../src/http/route.js';
import { createLogger } from '../../src/logger.js';
import { adminRoutes } from '../../src/modules/admin/admin.routes.js';
import { clickRedirectRoutes } from '../../src/modules/attribution/click-redirect.routes.js';
import { eventRoutes } from '../../src/modules/events/events.routes.js';
import { integrationRoutes } from '../../src/modules/integration/integration.routes.js';
import { keyIssuanceRoutes } from '../../src/modules/keys/issuance.routes.js';
import { pingRoutes } from '../../src/modules/keys/ping.routes.js';
import { orderRoutes } from '../../src/modules/orders/orders.routes.js';
import { storageRefusal } from '../../src/shared/errors.js';
import { isStorableText, text, UNSTORABLE_TEXT_MESSAGE } from '../../src/shared/text.js';

// Route factories only keep their deps; nothing here connects to anything.
const deps = {
  config: {},
  orm: {},
  redis: { defineCommand() {} },
  queues: {},
  logger: createLogger('silent'),
} as unknown as AppDeps;

const routes: AnyRoute[] = [
  ...pingRoutes,
  ...eventRoutes(deps),
  ...orderRoutes(deps),
  ...integrationRoutes(deps),
  ...keyIssuanceRoutes(deps),
  ...adminRoutes(deps),
  ...clickRedirectRoutes(deps),
];

/** Every string a schema accepts, with its path (`body.data.items[].name`). */
function stringLeaves(schema: z.ZodType, path: string): { path: string; schema: z.ZodType }[] {
  // biome-ignore lint/suspicious/noExplicitAny: walking zod's internal definitions.
  const def = (schema as any)._zod.def;
  switch (def.type) {
    case 'string':
      return [{ path, schema }];
    case 'object':
      return Object.entries(def.shape as Record<string, z.ZodType>).flatMap(([key, s]) =>
        stringLeaves(s, `${path}.${key}`),
      );
    case 'array':
      return stringLeaves(def.element, `${path}[]`);
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'nonoptional':
    case 'catch':
      return stringLeaves(def.innerType, path);
    case 'pipe':
      return [...stringLeaves(def.in, path), ...stringLeaves(def.out, path)];
    case 'union':
      return (def.options as z.ZodType[]).flatMap((s) => stringLeaves(s, path));
    case 'record':
      return [...stringLeaves(def.keyType, `${path}{key}`), ...stringLeaves(def.valueType, `${path}{}`)];
    case 'lazy':
      return stringLeaves(def.getter(), path);
    default:
      return [];
  }
}

/**
 * Every list's cursor is refused as `invalid_cursor` (api-v1.md) by its signature check, which
 * runs before anything reads it; a NUL there never reaches the database.
 */
const refusedElsewhere = (path: string) => path === 'query.cursor';

describe('storable text', () => {
  it('refuses NUL and unpaired surrogates, keeps every other string (astral characters included)', () => {
    for (const bad of ['a\u0000b', '\u0000', '\ud800', 'x\udfff', '\udc00\ud800', 'ok\ud83d']) {
      expect(isStorableText(bad), JSON.stringify(bad)).toBe(false);
    }
    for (const good of ['', 'plain', '한글 주문', '😀 \ud83d\ude00', '\u0001\u001f\u007f', '\ufffd\uffff']) {
      expect(isStorableText(good), JSON.stringify(good)).toBe(true);
    }
  });

  it('text() is a z.string that names the problem', () => {
    const result = text().max(5).safeParse('a\u0000');
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toBe(UNSTORABLE_TEXT_MESSAGE);
    expect(text().max(5).safeParse('abcdef').success).toBe(false);
    expect(text().safeParse(1).success).toBe(false);
    expect(text().trim().safeParse('  a ').data).toBe('a');
  });

  it('every string in every route’s path, query and body schema refuses NUL and unpaired surrogates', () => {
    const accepted: string[] = [];
    let checked = 0;
    for (const def of routes) {
      for (const part of ['params', 'query', 'body'] as const) {
        const schema = def[part];
        if (!schema) continue;
        for (const leaf of stringLeaves(schema, part)) {
          const where = `${def.operationId} ${leaf.path}`;
          if (refusedElsewhere(leaf.path)) continue;
          checked++;
          for (const bad of ['a\u0000b', 'ab\ud800']) {
            if (leaf.schema.safeParse(bad).success) accepted.push(`${where} accepts ${JSON.stringify(bad)}`);
          }
        }
      }
    }
    expect(accepted).toEqual([]);
    expect(checked).toBeGreaterThan(30);
  });
});

describe('storageRefusal', () => {
  const pgError = (code: string, message = 'some message') =>
    Object.assign(new Error(message), { code, severity: 'ERROR', routine: 'r' });

  it('turns a PostgreSQL data exception into a non-retryable 422 that quotes nothing', () => {
    for (const code of ['22P05', '22P02', '22001', '22003', '22007', '22021']) {
      const refused = storageRefusal(pgError(code, 'invalid input syntax for type integer: "secret"'));
      expect(refused?.status, code).toBe(422);
      expect(refused?.code).toBe('invalid_request_body');
      expect(refused?.message).toContain(`SQLSTATE ${code}`);
      expect(refused?.message).not.toContain('secret');
    }
    // node-postgres sends a NUL inside a bound text parameter; PostgreSQL reads a C string and says this.
    expect(storageRefusal(pgError('08P01', 'invalid message format'))?.status).toBe(422);
  });

  it('leaves every other error alone', () => {
    expect(storageRefusal(pgError('23505'))).toBeUndefined();
    expect(storageRefusal(pgError('40001'))).toBeUndefined();
    expect(storageRefusal(pgError('08P01', 'insufficient data left in message'))).toBeUndefined();
    expect(storageRefusal(Object.assign(new Error('x'), { code: '22000' }))).toBeUndefined(); // not from PostgreSQL
    expect(storageRefusal(new Error('22P05'))).toBeUndefined();
    expect(storageRefusal(undefined)).toBeUndefined();
    expect(storageRefusal('22P05')).toBeUndefined();
  });
});
