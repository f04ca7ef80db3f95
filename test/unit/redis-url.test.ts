import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { isClusterUrl, parseClusterUrl, redisUrlProblem } from '../../src/redis-url.js';
import { checkDependencies, describeUnreachable, whereOf } from '../../src/shared/unreachable.js';

const production = {
  NODE_ENV: 'production',
  DATABASE_URL: 'postgres://u:p@db.example.com:5432/app',
  ADMIN_TOKEN: 'a'.repeat(32),
  SECRET_KEY_BASE: 'b'.repeat(32),
};

describe('REDIS_URL naming a Redis Cluster', () => {
  it('lists its nodes, with credentials and TLS from the URL', () => {
    expect(parseClusterUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/')).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 7001 },
        { host: '::1', port: 7002 },
      ],
      tls: false,
    });
    expect(parseClusterUrl('rediss+cluster://app:p%40ss@cfg.cache.example.com')).toEqual({
      nodes: [{ host: 'cfg.cache.example.com', port: 6379 }],
      username: 'app',
      password: 'p@ss',
      tls: true,
    });
    // The usual "default user, a password" form.
    expect(parseClusterUrl('redis+cluster://:secret@h1:7000,h2:7000')).toMatchObject({ password: 'secret' });
    expect(parseClusterUrl('redis+cluster://:secret@h1:7000').username).toBeUndefined();
  });

  it('is told apart from a single Redis by its scheme only', () => {
    expect(isClusterUrl('redis+cluster://h:1')).toBe(true);
    expect(isClusterUrl('REDISS+CLUSTER://h:1')).toBe(true);
    expect(isClusterUrl('redis://h:1')).toBe(false);
    expect(isClusterUrl('rediss://h+cluster:1')).toBe(false);
  });

  it.each([
    ['redis+cluster://h1:7000/1', /only database 0/],
    ['redis+cluster://h1:7000/?tls=true', /may end with \/ only/],
    ['redis+cluster://h1:7000,,h2:7001/', /lists no node, or an empty one/],
    ['redis+cluster:///', /lists no node/],
    ['redis+cluster://h1:notaport/', /node "h1:notaport" that is not host:port/],
    ['redis://not a url', /is not a valid URL/],
    ['http://redis:6379', /must start with redis:\/\/ or rediss:\/\/ \(or redis\+cluster:\/\//],
  ])('refuses %s with a sentence', (url, problem) => {
    expect(redisUrlProblem(url)).toMatch(problem);
  });

  it('is accepted as REDIS_URL, and a malformed one stops the process with one line naming it', () => {
    const url = 'rediss+cluster://:pw@n1.example.com:6379,n2.example.com:6379/';
    expect(loadConfig({ ...production, REDIS_URL: url }).REDIS_URL).toBe(url);
    expect(() => loadConfig({ ...production, REDIS_URL: 'redis+cluster://n1:6379/3' })).toThrow(
      /^Configuration error: REDIS_URL names a Redis Cluster and may end with \/ only \(found "\/3"\): a cluster has only database 0 .*Set REDIS_URL in the environment and restart\.$/,
    );
  });

  it("is named in outage lines by its nodes, never its password, with the last node's own error", () => {
    const url = 'redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7001/';
    expect(whereOf(url)).toBe('10.0.0.1:7000,10.0.0.2:7001');
    expect(whereOf('redis://:secret@[::1]:7000')).toBe('[::1]:7000');
    // ioredis's ClusterAllFailedError: the cause is on `lastNodeError`.
    const allFailed = Object.assign(new Error('Failed to refresh slots cache.'), {
      lastNodeError: Object.assign(new Error('connect ECONNREFUSED 10.0.0.2:7001'), { code: 'ECONNREFUSED' }),
    });
    const line = describeUnreachable(allFailed, 'Redis', url);
    expect(line).toBe(
      'Cannot use Redis at 10.0.0.1:7000,10.0.0.2:7001: connection refused: nothing listens there. Check REDIS_URL and that Redis is running, then start again.',
    );
    expect(line).not.toContain('secret');
  });

  it('is probed by the dependency check (npm run dev, the web and worker at start) node by node', async () => {
    const { Redis } = await checkDependencies(
      {
        databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
        redisUrl: 'redis+cluster://127.0.0.1:1,127.0.0.1:2/',
      },
      { timeoutMs: 1000 },
    );
    expect(Redis).toBe(
      'Cannot use Redis at 127.0.0.1:1,127.0.0.1:2: connection refused: nothing listens there. Check REDIS_URL and that Redis is running, then start again.',
    );
    // The test run's own Redis is a single server: named as a cluster, it says so.
    const single = await checkDependencies(
      {
        databaseUrl: 'postgres://postgres@127.0.0.1:5432/postgres',
        redisUrl: 'redis+cluster://127.0.0.1:6379/',
      },
      { timeoutMs: 1000 },
    );
    expect(single.Redis).toBe(
      'Cannot use Redis at 127.0.0.1:6379: it is a single Redis, not a cluster (name it redis:// or rediss://, without +cluster). Check REDIS_URL and that Redis is running, then start again.',
    );
  });

  it('a cluster that no node answers for, or that is down, is said so in the outage line', () => {
    const url = 'redis+cluster://h1:7000,h2:7000/';
    const allFailed = Object.assign(new Error('Failed to refresh slots cache.'), {
      lastNodeError: new Error('Connection is closed.'),
    });
    expect(describeUnreachable(allFailed, 'Redis', url)).toMatch(
      /^Cannot use Redis at h1:7000,h2:7000: no node of the cluster answers\. Check REDIS_URL/,
    );
    expect(
      describeUnreachable(
        new Error('Too many Cluster redirections. Last error: CLUSTERDOWN The cluster is down'),
        'Redis',
        url,
      ),
    ).toMatch(/: the cluster is down \(a master without a replica is lost/);
  });
});
