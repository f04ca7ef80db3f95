import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { checkDependencies, describeUnreachable } from '../../src/shared/unreachable.js';

describe('describeUnreachable', () => {
  it('names where, what happened and what to check, never the password', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.9:5433'), { code: 'ECONNREFUSED' });
    const line = describeUnreachable(refused, 'PostgreSQL', 'postgres://u:secret@db.internal:5433/app');
    expect(line).toBe(
      'Cannot use PostgreSQL at db.internal:5433: connection refused: nothing listens there. Check DATABASE_URL and that PostgreSQL is running, then start again.',
    );
    expect(line).not.toContain('secret');
  });

  it('finds the cause in a wrapped or aggregated error, and says TLS for a self-signed certificate', () => {
    const wrapped = { message: 'DriverException', cause: { errors: [{ code: 'ENOTFOUND' }] } };
    expect(describeUnreachable(wrapped, 'Redis', 'rediss://h.example.com:6380')).toContain(
      'h.example.com:6380: the host name does not resolve. Check REDIS_URL',
    );
    expect(describeUnreachable(new Error('self-signed certificate'), 'Redis', 'rediss://x:1')).toContain(
      'self-signed',
    );
  });

  it('is undefined for errors that are not about reaching the dependency', () => {
    expect(
      describeUnreachable(Object.assign(new Error('x'), { code: '23505' }), 'PostgreSQL', 'postgres://h/db'),
    ).toBe(undefined);
  });
});

describe('checkDependencies', () => {
  it('answers undefined for each dependency that works and the one line for each that does not', async () => {
    // A port that accepts and closes at once: neither PostgreSQL nor Redis.
    const server = createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    try {
      const down = await checkDependencies(
        {
          databaseUrl: 'postgres://postgres@127.0.0.1:1/postgres',
          redisUrl: `redis://127.0.0.1:${port}`,
        },
        { timeoutMs: 1000 },
      );
      expect(down.PostgreSQL).toMatch(/^Cannot use PostgreSQL at 127\.0\.0\.1:1: connection refused/);
      expect(down.Redis).toMatch(/^(Cannot use )?Redis at 127\.0\.0\.1:\d+/);
      const up = await checkDependencies({
        databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
        redisUrl: 'redis://127.0.0.1:6379',
      });
      expect(up).toEqual({ PostgreSQL: undefined, Redis: undefined });
    } finally {
      server.close();
    }
  });
});
