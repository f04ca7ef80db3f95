import type { Server } from 'node:http';
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createShop } from '../../sdk/examples/shop.js';
import { LfClient } from '../../sdk/src/index.js';
import { makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { closeServer, listenLocally } from '../setup/local-server.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { launchChromium, requireChromium, skipWithoutChromium } from './browser.js';

/**
 * README "Tracking a sale end to end", walked in Chromium: the example shop (sdk/examples/shop.ts)
 * on its own origin, lf.js from the service, lfClick() and the SDK on the shop's server.
 */
const skip = skipWithoutChromium('test/browser/shop-example.test.ts');

let ctx: TestContext;
let browser: Browser;
let apiServer: Server;
let api: string;
let shopServer: Server;
let shop: string;
let context: BrowserContext | undefined;
let brandId: string;
let keys: { sk_test: string; pk_test: string };
let clickRef: string;

beforeAll(async () => {
  if (skip) return;
  requireChromium();
  ctx = await createTestApp();
  ({ server: apiServer, origin: api } = await listenLocally(ctx.app));
  // The shop's origin must be known before the brand registers it: bind first, then wire the app.
  let handler: ReturnType<typeof createShop> | undefined;
  ({ server: shopServer, origin: shop } = await listenLocally((req, res) => handler?.(req, res)));
  const made = await makeBrandWithKeys(ctx.orm, { allowed_origins: [shop] });
  brandId = made.brand.id;
  keys = { sk_test: made.keys.sk_test, pk_test: made.keys.pk_test };
  clickRef = (await makeCreators(ctx, brandId)).mina.clickRef;
  handler = createShop({ apiUrl: api, secretKey: keys.sk_test, publishableKey: keys.pk_test });
  browser = await launchChromium();
});
afterEach(async () => {
  await context?.close();
  context = undefined;
});
afterAll(async () => {
  await browser?.close();
  await closeServer(shopServer);
  await closeServer(apiServer);
  await ctx?.close();
});

async function receivedTypes(): Promise<string[]> {
  const rows = await ctx.orm.em
    .fork()
    .execute<{ type: string }[]>('select type from received_events where brand_id = ? order by type', [
      brandId,
    ]);
  return rows.map((r) => r.type);
}

describe.skipIf(skip)('the example shop, as the README walks through it', () => {
  it('a follower lands with lf_click, buys later on the same browser: the order is attributed by click and observed', async () => {
    context = await browser.newContext();
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));

    await page.goto(`${shop}/?lf_click=${clickRef}`);
    // lfClick() set the server's HttpOnly cookie; lf.js its own readable one.
    await expect
      .poll(async () =>
        (await context!.cookies(shop)).map((c) => `${c.name}=${c.value} ${c.httpOnly}`).sort(),
      )
      .toEqual([`_lf_click=${clickRef} false`, `lf_click=${clickRef} true`]);

    // Later, without lf_click in the URL: the cookie carries the click to checkout.
    await page.goto(`${shop}/`);
    await page.getByRole('button', { name: 'Buy now' }).click();
    await page.waitForURL(/\/thanks\?/);
    expect(await page.locator('body').textContent()).toContain('(attributed)');
    const orderId = new URL(page.url()).searchParams.get('order_id')!;

    const lf = new LfClient({ apiKey: keys.sk_test, baseUrl: api });
    const order = await lf.orders.get(orderId);
    expect(order).toMatchObject({
      attributed: true,
      attributed_via: 'click',
      amount: 39000,
      livemode: false,
    });
    // Two pages viewed, the order paid from the server and observed from the thank-you page.
    await expect
      .poll(receivedTypes, { timeout: 10_000 })
      .toEqual(['order.observed', 'order.paid', 'page.viewed', 'page.viewed', 'page.viewed']);
    expect(errors).toEqual([]);
  });

  it('a buyer who never clicked a creator link: the order is accepted as unattributed', async () => {
    context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${shop}/`);
    await page.getByRole('button', { name: 'Buy now' }).click();
    await page.waitForURL(/\/thanks\?/);
    expect(await page.locator('body').textContent()).toContain('(unattributed)');
    expect((await context.cookies(shop)).map((c) => c.name)).toEqual([]);
  });
});
