import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN_WITHHELD } from '../../src/modules/admin/demo-seed.js';
import { compiledEntry } from '../setup/compiled.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

const run = promisify(execFile);
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

function seedEnv(nodeEnv: string) {
  return {
    ...process.env,
    NODE_ENV: nodeEnv,
    DATABASE_URL: ctx.config.DATABASE_URL,
    REDIS_URL: ctx.config.REDIS_URL,
    ADMIN_TOKEN: ctx.config.ADMIN_TOKEN,
    SECRET_KEY_BASE: ctx.config.SECRET_KEY_BASE,
    PORT: '4321',
  };
}

/** `npm run --silent seed` as the README runs it (NODE_ENV=development unless told otherwise). */
async function seed(nodeEnv = 'development') {
  const { stdout, stderr } = await run('npm', ['run', '--silent', 'seed'], { env: seedEnv(nodeEnv) });
  return { stdout, stderr, doc: JSON.parse(stdout) };
}

// Each `npm run seed` starts npm and tsx: seconds, and several times that on a loaded machine.
describe('npm run --silent seed', () => {
  it('prints exactly one JSON document of the admin-api.md shape, with keys that work', async () => {
    const { stdout, doc } = await seed();
    expect(stdout.trim().startsWith('{')).toBe(true);
    expect(doc).toMatchObject({
      api_base_url: 'http://127.0.0.1:4321',
      admin_token: ctx.config.ADMIN_TOKEN,
      brand_id: expect.stringMatching(/^brand_/),
      allowed_origin: 'http://localhost:5173',
    });
    expect(Object.keys(doc.keys).sort()).toEqual(['pk_live', 'pk_test', 'sk_live', 'sk_test']);
    expect(doc.creators).toHaveLength(2);
    for (const c of doc.creators) {
      expect(c).toEqual({
        creator_id: expect.stringMatching(/^cr_/),
        coupon_code: expect.any(String),
        offer_id: expect.stringMatching(/^off_/),
        click_ref: expect.stringMatching(/^clk_/),
      });
    }
    for (const [name, key] of Object.entries(doc.keys as Record<string, string>)) {
      const res = await request(ctx.app)
        .get('/v1/ping')
        .set('Authorization', `Bearer ${key}`)
        .set('Origin', doc.allowed_origin);
      expect(res.status, name).toBe(200);
      expect(res.body.livemode).toBe(name.endsWith('live'));
    }
  }, 60_000);

  // Before, every environment printed it: `heroku run npm run --silent seed` put the production
  // ADMIN_TOKEN in the terminal and in Heroku's logs.
  it.each(['test', 'production'])(
    'with NODE_ENV=%s it prints a placeholder string for the admin token, in the same shape',
    async (nodeEnv) => {
      // Compiled, as scripts/entry.mjs runs it in production (dist/scripts/seed.js): seconds faster.
      const { stdout, stderr } = await run(process.execPath, [compiledEntry('scripts/seed.ts')], {
        env: {
          ...seedEnv(nodeEnv),
          API_HOSTS: 'api.example.com',
          PUBLIC_BASE_URL: 'https://api.example.com',
        },
      });
      expect(stdout + stderr).not.toContain(ctx.config.ADMIN_TOKEN);
      const doc = JSON.parse(stdout);
      expect(Object.keys(doc)).toEqual([
        'api_base_url',
        'admin_token',
        'brand_id',
        'allowed_origin',
        'keys',
        'creators',
      ]);
      expect(doc).toMatchObject({
        api_base_url: 'https://api.example.com',
        admin_token: ADMIN_TOKEN_WITHHELD,
      });
      expect(Object.keys(doc.keys).sort()).toEqual(['pk_live', 'pk_test', 'sk_live', 'sk_test']);
    },
    30_000,
  );

  it('is idempotent: a second run keeps the brand, codes and keys, and adds only fresh clicks', async () => {
    const first = (await seed()).doc;
    const second = (await seed()).doc;
    expect(second.keys).toEqual(first.keys);
    expect(second.brand_id).toBe(first.brand_id);
    expect(second.creators.map((c: { coupon_code: string }) => c.coupon_code)).toEqual(
      first.creators.map((c: { coupon_code: string }) => c.coupon_code),
    );
    expect(second.creators[0].click_ref).not.toBe(first.creators[0].click_ref);
    const em = ctx.orm.em.fork();
    const [counts] = await em.execute(
      `select (select count(*) from brands)::int as brands, (select count(*) from creators)::int as creators,
              (select count(*) from coupon_codes)::int as codes,
              (select count(*) from api_keys where revoked_at is null)::int as active_keys`,
    );
    expect(counts).toEqual({ brands: 1, creators: 2, codes: 2, active_keys: 4 });
  }, 90_000);
});
