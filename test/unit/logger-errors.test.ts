import { describe, expect, it } from 'vitest';
import { safePostgresMessage, serializeError } from '../../src/logger.js';
import { capturingLogger } from '../setup/capturing-logger.js';

/** node-postgres' DatabaseError as it arrives: every field PostgreSQL sent, own and enumerable. */
function pgError(fields: Record<string, unknown> & { message: string }) {
  const { message, ...rest } = fields;
  return Object.assign(new Error(message), { name: 'error', length: 200, severity: 'ERROR', ...rest });
}

/** A MikroORM DriverException copies the driver error's own fields onto itself. */
class UniqueConstraintViolationException extends Error {
  constructor(previous: Error) {
    super(previous.message);
    for (const key of Object.getOwnPropertyNames(previous)) {
      if (key !== 'stack') (this as Record<string, unknown>)[key] = (previous as never)[key];
    }
    this.name = 'UniqueConstraintViolationException';
  }
}

const FRAGMENT = 'mina.kim@example.com';

function logged(err: unknown): string {
  const { logger, lines } = capturingLogger();
  logger.error({ err }, 'failed');
  return lines.join('');
}

describe('error logs', () => {
  it('keep SQLSTATE and names but drop detail, where, hint, internal query and parameters', () => {
    const err = pgError({
      message: 'duplicate key value violates unique constraint "coupon_codes_code_key"',
      code: '23505',
      constraint: 'coupon_codes_code_key',
      table: 'coupon_codes',
      schema: 'public',
      routine: '_bt_check_unique',
      detail: `Key (code)=(${FRAGMENT}) already exists.`,
      where: `unnamed portal parameter $1 = '${FRAGMENT}'`,
      hint: `try ${FRAGMENT}`,
      internalQuery: `select '${FRAGMENT}'`,
      internalPosition: '8',
      position: '12',
      parameters: [FRAGMENT],
      file: 'nbtinsert.c',
      line: '666',
    });
    const line = logged(err);
    expect(line).not.toContain(FRAGMENT);
    const out = JSON.parse(line).err;
    expect(out).toMatchObject({
      code: '23505',
      constraint: 'coupon_codes_code_key',
      table: 'coupon_codes',
      routine: '_bt_check_unique',
      message: 'duplicate key value violates unique constraint "coupon_codes_code_key"',
    });
    for (const field of ['detail', 'where', 'hint', 'internalQuery', 'parameters', 'position']) {
      expect(out).not.toHaveProperty(field);
    }
    expect(out.stack).toContain('unique constraint "coupon_codes_code_key"');
  });

  it('replace values PostgreSQL quotes in its message, in the message and the stack', () => {
    const err = pgError({
      message: `invalid input syntax for type integer: "${FRAGMENT}"`,
      code: '22P02',
      routine: 'pg_strtoint32_safe',
    });
    const line = logged(err);
    expect(line).not.toContain(FRAGMENT);
    const out = JSON.parse(line).err;
    expect(out.message).toBe('invalid input syntax for type integer: "…"');
    expect(out.stack).toContain('invalid input syntax for type integer: "…"');
    expect(out.code).toBe('22P02');
  });

  it('scrub a MikroORM exception and an error whose cause is a PostgreSQL error', () => {
    const driver = pgError({
      message: `value "${FRAGMENT}" is out of range for type integer`,
      code: '22003',
      detail: FRAGMENT,
      where: FRAGMENT,
    });
    const wrapped = new UniqueConstraintViolationException(driver);
    const caused = new Error('could not store the order', { cause: driver });
    const nested = Object.assign(new Error('outer'), { original: driver });
    for (const err of [wrapped, caused, nested]) {
      const line = logged(err);
      expect(line).not.toContain(FRAGMENT);
      expect(line).toContain('22003');
    }
    expect(JSON.parse(logged(wrapped)).err.message).toBe('value "…" is out of range for type integer');
  });

  it('cut the detail and hint MikroORM appends to the message (and so to the stack)', () => {
    // As PostgreSqlExceptionConverter does before wrapping the driver's error.
    const driver = pgError({
      message: 'duplicate key value violates unique constraint "brands_name_key"',
      code: '23505',
      constraint: 'brands_name_key',
      detail: `Key (name)=(${FRAGMENT}) already exists.`,
    });
    driver.message += `\n - detail: ${(driver as unknown as { detail: string }).detail}\n - hint: ask ${FRAGMENT}`;
    const wrapped = new UniqueConstraintViolationException(driver);
    wrapped.stack = `UniqueConstraintViolationException: ${wrapped.message}\n    at somewhere`;
    const line = logged(wrapped);
    expect(line).not.toContain(FRAGMENT);
    // The driver's own error, logged as it is: its stack was taken before the detail was appended.
    const raw = pgError({ message: `invalid input syntax for type integer: "${FRAGMENT}"`, code: '22P02' });
    raw.message += `\n - detail: ${FRAGMENT}`;
    expect(raw.stack).toContain(FRAGMENT);
    expect(logged(raw)).not.toContain(FRAGMENT);
    expect(JSON.parse(line).err).toMatchObject({
      message: 'duplicate key value violates unique constraint "brands_name_key"',
      code: '23505',
      constraint: 'brands_name_key',
    });
  });

  it('keep messages whose quotes are names, and syntax errors as they are', () => {
    const notNull = {
      message: 'null value in column "order_id" of relation "orders" violates not-null constraint',
      code: '23502',
      column: 'order_id',
      table: 'orders',
    };
    expect(safePostgresMessage(notNull)).toBe(notNull.message);
    const undefinedColumn = { message: 'column "colour" does not exist', code: '42703' };
    expect(safePostgresMessage(undefinedColumn)).toBe(undefinedColumn.message);
    expect(
      safePostgresMessage({
        message: 'invalid byte sequence for encoding "UTF8": 0xed 0xa0 0x80',
        code: '22021',
      }),
    ).toBe('invalid byte sequence for encoding "…": 0x…');
    expect(safePostgresMessage({ message: 'unsupported Unicode escape sequence', code: '22P05' })).toBe(
      'unsupported Unicode escape sequence',
    );
  });

  it('leave other errors and non-errors as pino would log them', () => {
    expect(serializeError('just a string')).toBe('just a string');
    const out = serializeError(Object.assign(new Error('boom'), { code: 'ECONNREFUSED', port: 5432 }));
    expect(out).toMatchObject({ type: 'Error', message: 'boom', code: 'ECONNREFUSED', port: 5432 });
  });
});
