import { describe, expect, it } from 'vitest';
import { loadConfig, requirePublicHosts } from '../../src/config.js';

const production = {
  NODE_ENV: 'production',
  DATABASE_URL: 'postgres://u:p@db.example.com:5432/app',
  REDIS_URL: 'rediss://:pw@redis.example.com:6380',
  ADMIN_TOKEN: 'a'.repeat(32),
  SECRET_KEY_BASE: 'b'.repeat(32),
};

describe('configuration', () => {
  it('accepts Heroku-style production settings, rediss:// included', () => {
    const config = loadConfig({
      ...production,
      PORT: '5000',
      API_HOSTS: 'api.example.com:443, Test.Example.com',
    });
    expect(config.PORT).toBe(5000);
    expect(config.REDIS_URL).toBe(production.REDIS_URL);
    expect(config.API_HOSTS).toEqual(['api.example.com', 'test.example.com']);
    // Unset in production: no local default (the web process refuses to start, see below).
    expect(config.PUBLIC_BASE_URL).toBe('');
  });

  it('production without API_HOSTS or PUBLIC_BASE_URL: the web process refuses to start, naming both', () => {
    const config = loadConfig(production);
    expect(config.API_HOSTS).toEqual([]);
    expect(() => requirePublicHosts(config)).toThrow(
      /^Configuration error: API_HOSTS and PUBLIC_BASE_URL are not set; in production every call would be refused as wrong_host\./,
    );
    const half = loadConfig({ ...production, API_HOSTS: 'api.example.com' });
    expect(() => requirePublicHosts(half)).toThrow(/^Configuration error: PUBLIC_BASE_URL is not set;/);
  });

  it("production on Heroku with dyno metadata: the app's own host for both", () => {
    const config = loadConfig({
      ...production,
      HEROKU_APP_DEFAULT_DOMAIN_NAME: 'Brand-API-1a2b.herokuapp.com',
    });
    expect(config.API_HOSTS).toEqual(['brand-api-1a2b.herokuapp.com']);
    expect(config.PUBLIC_BASE_URL).toBe('https://brand-api-1a2b.herokuapp.com');
    expect(() => requirePublicHosts(config)).not.toThrow();
    // What is set wins over the platform's host.
    const set = loadConfig({
      ...production,
      HEROKU_APP_DEFAULT_DOMAIN_NAME: 'x.herokuapp.com',
      API_HOSTS: 'api.example.com',
      PUBLIC_BASE_URL: 'https://api.example.com',
    });
    expect([set.API_HOSTS, set.PUBLIC_BASE_URL]).toEqual([['api.example.com'], 'https://api.example.com']);
  });

  it('development keeps local hosts', () => {
    const config = loadConfig({ NODE_ENV: 'development', PORT: '3000' });
    expect(config.API_HOSTS).toEqual(['localhost', '127.0.0.1']);
    expect(config.PUBLIC_BASE_URL).toBe('http://127.0.0.1:3000');
  });

  it.each(['DATABASE_URL', 'REDIS_URL', 'ADMIN_TOKEN', 'SECRET_KEY_BASE'])(
    'production without %s names it',
    (name) => {
      const env: Record<string, string> = { ...production };
      delete env[name];
      expect(() => loadConfig(env)).toThrow(new RegExp(`^Configuration error: ${name} is not set\\.`));
    },
  );

  it.each([
    ['REDIS_URL', 'http://redis:6379', /REDIS_URL must start with redis:\/\/ or rediss:\/\//],
    ['ADMIN_TOKEN', 'short', /ADMIN_TOKEN must be at least 32 characters/],
    ['PORT', 'eighty', /PORT/],
    ['DATABASE_URL', 'mysql://x', /DATABASE_URL must be a postgres:\/\/ URL/],
    ['LOG_LEVEL', 'loud', /LOG_LEVEL/],
    ['WEB_CONCURRENCY', 'two', /WEB_CONCURRENCY/],
    ['WEB_CONCURRENCY', '0', /WEB_CONCURRENCY/],
    ['WEB_CONCURRENCY', '33', /WEB_CONCURRENCY/],
    ['WEB_CONCURRENCY', '1.5', /WEB_CONCURRENCY/],
  ])('a bad %s stops with one line naming it', (name, value, message) => {
    let error: Error | undefined;
    try {
      loadConfig({ ...production, [name]: value });
    } catch (err) {
      error = err as Error;
    }
    expect(error?.message).toMatch(message);
    expect(error?.message.split('\n')).toHaveLength(1);
  });

  it('WEB_CONCURRENCY is 1 (one plain process) unless set, and read as an integer', () => {
    expect(loadConfig(production).WEB_CONCURRENCY).toBe(1);
    expect(loadConfig({ ...production, WEB_CONCURRENCY: '' }).WEB_CONCURRENCY).toBe(1);
    expect(loadConfig({ ...production, WEB_CONCURRENCY: '4' }).WEB_CONCURRENCY).toBe(4);
    expect(loadConfig({ ...production, WEB_CONCURRENCY: '32' }).WEB_CONCURRENCY).toBe(32);
  });

  it.each(['development', 'test', 'production', undefined])(
    'NODE_ENV=%s: webhook URLs must be public unless WEBHOOK_ALLOW_PRIVATE_URLS=true says otherwise',
    (mode) => {
      const env = { ...production, NODE_ENV: mode };
      expect(loadConfig(env).WEBHOOK_ALLOW_PRIVATE_URLS).toBe(false);
      expect(loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_URLS: '' }).WEBHOOK_ALLOW_PRIVATE_URLS).toBe(false);
      expect(loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_URLS: 'false' }).WEBHOOK_ALLOW_PRIVATE_URLS).toBe(
        false,
      );
      expect(loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).WEBHOOK_ALLOW_PRIVATE_URLS).toBe(
        true,
      );
      expect(() => loadConfig({ ...env, WEBHOOK_ALLOW_PRIVATE_URLS: 'yes' })).toThrow(
        /^Configuration error: WEBHOOK_ALLOW_PRIVATE_URLS must be true or false\./,
      );
    },
  );

  it("trusts one proxy hop in production (Heroku's router) and none elsewhere, unless TRUST_PROXY_HOPS says", () => {
    expect(loadConfig(production).TRUST_PROXY_HOPS).toBe(1);
    expect(loadConfig({ ...production, NODE_ENV: 'development' }).TRUST_PROXY_HOPS).toBe(0);
    expect(loadConfig({ ...production, TRUST_PROXY_HOPS: '0' }).TRUST_PROXY_HOPS).toBe(0);
    expect(loadConfig({ ...production, NODE_ENV: 'test', TRUST_PROXY_HOPS: '2' }).TRUST_PROXY_HOPS).toBe(2);
    expect(() => loadConfig({ ...production, TRUST_PROXY_HOPS: 'true' })).toThrow(
      /^Configuration error: TRUST_PROXY_HOPS /,
    );
  });

  it('development has working defaults', () => {
    const config = loadConfig({
      NODE_ENV: 'development',
      ADMIN_TOKEN: 'd'.repeat(32),
      SECRET_KEY_BASE: 'e'.repeat(32),
    });
    expect(config.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/lf_development');
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379');
    expect(config.API_HOSTS).toEqual(['localhost', '127.0.0.1']);
  });
});
