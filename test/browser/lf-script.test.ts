import type { Server } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { detectGaps } from '../../src/modules/integration/integration.service.js';
import { makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { closeServer, listenLocally } from '../setup/local-server.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { launchChromium, requireChromium, skipWithoutChromium } from './browser.js';

/**
 * lf.js in Chromium, as a shop uses it: the shop's pages come from another origin (another port)
 * registered for the brand and load the script from the service with `<script async src>`.
 */
const skip = skipWithoutChromium('test/browser/lf-script.test.ts');

/** The few browser globals the in-page functions below use (the tsconfig has no DOM lib). */
interface InPage {
  lf: ((...args: unknown[]) => void) & { loaded?: boolean };
  localStorage: { getItem(key: string): string | null; clear(): void };
  location: { href: string };
  queuedBeforeLoad?: boolean;
}

let ctx: TestContext;
let browser: Browser;
/** The service on a real port; `api` is its origin, where shops load lf.js from. */
let apiServer: Server;
let api: string;
/** Requests the service received: `METHOD path origin → status`. */
let received: string[] = [];
/** Delays the service's answer to CORS preflights, so a request is still in flight when a page leaves. */
let preflightDelayMs = 0;
/** The shop (registered origin) and a stranger (same pages, origin registered nowhere). */
let shopServer: Server;
let shop: string;
let strangerServer: Server;
let stranger: string;
/** The HTML the shop and the stranger serve for a path; each test sets it. */
let pageFor: (path: string) => string = () => '';

beforeAll(async () => {
  if (skip) return;
  requireChromium();
  ctx = await createTestApp();
  ({ server: apiServer, origin: api } = await listenLocally((req, res) => {
    const seen = `${req.method} ${req.url} ${req.headers.origin ?? '-'}`;
    res.on('finish', () => received.push(`${seen} → ${res.statusCode}`));
    if (req.method === 'OPTIONS' && preflightDelayMs > 0)
      setTimeout(() => ctx.app(req, res), preflightDelayMs);
    else ctx.app(req, res);
  }));
  const servePage = (req: { url?: string }, res: import('node:http').ServerResponse) => {
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end(pageFor(new URL(req.url ?? '/', 'http://x').pathname));
  };
  ({ server: shopServer, origin: shop } = await listenLocally(servePage));
  ({ server: strangerServer, origin: stranger } = await listenLocally(servePage));
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await closeServer(apiServer);
  await closeServer(shopServer);
  await closeServer(strangerServer);
  await ctx?.close();
});

/** A brand whose registered origin is the local shop, with a real click to land with. */
async function newShop() {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, { allowed_origins: [shop] });
  const { mina } = await makeCreators(ctx, brand.id);
  return { brandId: brand.id, keys, clickRef: mina.clickRef };
}

/** A shop page: the markup the docs give, with optional host scripts before and after the tag. */
function html(opts: { key: string; consent?: string; before?: string; after?: string }): string {
  const consent = opts.consent ? ` data-consent="${opts.consent}"` : '';
  return `<!doctype html><html><head><title>Acme order 1042 for Kim</title>${opts.before ?? ''}
<script async src="${api}/lf.js" data-key="${opts.key}"${consent}></script>${opts.after ?? ''}
</head><body><form><input name="email" value="kim@example.com"></form><a href="/next">next</a></body></html>`;
}

interface StoredEvent {
  type: string;
  key_kind: string;
  livemode: boolean;
  order_id: string | null;
  data: Record<string, unknown>;
}

async function storedEvents(brandId: string): Promise<StoredEvent[]> {
  return ctx.orm.em
    .fork()
    .execute<StoredEvent[]>(
      'select type, key_kind, livemode, order_id, data from received_events where brand_id = ? order by received_at, id',
      [brandId],
    );
}

/** Waits until the brand has `count` received events, and returns them. */
/** page.viewed before order.observed, whatever order the browser's concurrent sends arrived in. */
const byType = (rows: StoredEvent[]) =>
  [...rows].sort((a, b) => (a.type === b.type ? 0 : a.type === 'page.viewed' ? -1 : 1));

async function eventsOnceThere(brandId: string, count: number): Promise<StoredEvent[]> {
  await expect.poll(async () => (await storedEvents(brandId)).length, { timeout: 10_000 }).toBe(count);
  return storedEvents(brandId);
}

interface Watched {
  page: Page;
  /** Uncaught errors and unhandled rejections of the page, by message. */
  errors: string[];
  /** Bodies the page POSTed to the events endpoint, with their Authorization header. */
  sent: { body: unknown; authorization: string | undefined }[];
}

let context: BrowserContext | undefined;
afterEach(async () => {
  await context?.close();
  context = undefined;
  preflightDelayMs = 0;
  received = [];
});

async function openPage(): Promise<Watched> {
  context = await browser.newContext();
  const page = await context.newPage();
  const watched: Watched = { page, errors: [], sent: [] };
  page.on('pageerror', (e) => watched.errors.push(e.message));
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url() === `${api}/v1/events`) {
      watched.sent.push({ body: r.postDataJSON(), authorization: r.headers().authorization });
    }
  });
  return watched;
}

const scriptLoaded = (page: Page) =>
  page.waitForFunction(() => (globalThis as unknown as InPage).lf?.loaded === true);

async function clickCookie() {
  return (await context!.cookies(shop)).find((c) => c.name === '_lf_click');
}

const stored = (page: Page) =>
  page.evaluate(() => (globalThis as unknown as InPage).localStorage.getItem('_lf_click'));

describe.skipIf(skip)('lf.js in Chromium', () => {
  it('keeps lf_click of the landing URL in the _lf_click cookie and local storage; later pages read either back', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live });
    const { page, errors } = await openPage();
    await page.goto(`${shop}/serum?lf_click=${brand.clickRef}&utm_source=creator`);
    const [landing] = await eventsOnceThere(brand.brandId, 1);
    expect(landing).toMatchObject({ type: 'page.viewed', key_kind: 'publishable', livemode: true });
    expect(landing!.data).toMatchObject({ path: '/serum', clickRef: brand.clickRef });

    const cookie = await clickCookie();
    expect(cookie).toMatchObject({
      value: brand.clickRef,
      path: '/',
      sameSite: 'Lax',
      secure: false, // http here; the https case (Secure) is in test/integration/browser-script.test.ts
      httpOnly: false,
    });
    const days = (cookie!.expires * 1000 - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(395); // 13 months
    expect(days).toBeLessThanOrEqual(400); // Chromium's cap
    expect(await stored(page)).toBe(brand.clickRef);

    // The browser dropped the cookie (cut short): storage brings the click back, and the cookie.
    await context!.clearCookies();
    await page.goto(`${shop}/next`);
    expect((await eventsOnceThere(brand.brandId, 2))[1]!.data).toMatchObject({
      path: '/next',
      clickRef: brand.clickRef,
    });
    expect((await clickCookie())?.value).toBe(brand.clickRef);

    // Storage cleared, cookie kept: the cookie is read, and storage repaired.
    await page.evaluate(() => (globalThis as unknown as InPage).localStorage.clear());
    await page.goto(`${shop}/cart`);
    expect((await eventsOnceThere(brand.brandId, 3))[2]!.data).toMatchObject({
      path: '/cart',
      clickRef: brand.clickRef,
    });
    expect(await stored(page)).toBe(brand.clickRef);
    expect(errors).toEqual([]);
  });

  it('sends page.viewed with the publishable key: the path without query or fragment, the referring host, the click; nothing else', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live });
    const { page, sent, errors } = await openPage();
    await page.goto(`${shop}/products/serum?lf_click=${brand.clickRef}&email=kim%40example.com#reviews`, {
      referer: 'http://www.instagram.example/p/123?igshid=kim',
    });
    const [row] = await eventsOnceThere(brand.brandId, 1);
    expect(sent).toEqual([
      {
        authorization: `Bearer ${brand.keys.pk_live}`,
        body: {
          type: 'page.viewed',
          data: {
            path: '/products/serum',
            referrer_host: 'www.instagram.example',
            click_ref: brand.clickRef,
          },
        },
      },
    ]);
    expect(row).toMatchObject({ type: 'page.viewed', key_kind: 'publishable' });
    expect(row!.data).toMatchObject({
      path: '/products/serum',
      referrerHost: 'www.instagram.example',
      clickRef: brand.clickRef,
    });
    // Nothing of the query, fragment, referrer path, title or form reached the service.
    const text = JSON.stringify(row);
    for (const personal of ['kim', 'Kim', 'Acme', 'reviews', 'igshid', 'utm'])
      expect(text).not.toContain(personal);
    expect(errors).toEqual([]);
  });

  it('an observed order without a server-side order.paid is listed in missing_orders after the gap job', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live });
    const { page, errors } = await openPage();
    await page.goto(`${shop}/thanks`);
    await scriptLoaded(page);
    await page.evaluate(() => {
      (globalThis as unknown as InPage).lf('observe', {
        order_id: 'ord-missing-1',
        amount: 12900,
        currency: 'KRW',
      });
      (globalThis as unknown as InPage).lf('observe', {
        order_id: 'ord-paid-1',
        amount: 5000,
        currency: 'KRW',
      });
    });
    const rows = await eventsOnceThere(brand.brandId, 3);
    expect(
      rows
        .filter((r) => r.type === 'order.observed')
        .map((r) => [r.order_id, r.key_kind])
        .sort(),
    ).toEqual([
      ['ord-missing-1', 'publishable'],
      ['ord-paid-1', 'publishable'],
    ]);
    // The shop's server sends one of them.
    const paid = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${brand.keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'ord-paid-1', amount: 5000 } });
    expect(paid.status).toBe(200);

    // The sweep with no delay: every observation so far counts.
    expect((await detectGaps(ctx.orm.em.fork(), 0)).recorded).toBeGreaterThanOrEqual(1);
    const missing = await request(ctx.app)
      .get('/v1/integration/missing_orders')
      .set('Authorization', `Bearer ${brand.keys.sk_live}`);
    expect(missing.status).toBe(200);
    expect(missing.body.data).toEqual([
      expect.objectContaining({
        object: 'missing_order',
        order_id: 'ord-missing-1',
        amount: 12900,
        currency: 'KRW',
      }),
    ]);
    expect(errors).toEqual([]);
  });

  it('data-consent="pending": nothing stored or sent; consent given: stored and sent; withdrawn: cleared and silent', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live, consent: 'pending' });
    const { page, sent, errors } = await openPage();
    await page.goto(`${shop}/landing?lf_click=${brand.clickRef}`);
    await scriptLoaded(page);
    await page.evaluate(() =>
      (globalThis as unknown as InPage).lf('observe', {
        order_id: 'ord-consent',
        amount: 100,
        currency: 'KRW',
      }),
    );
    await page.waitForTimeout(300);
    expect(sent).toEqual([]);
    expect(received.filter((r) => r.includes('/v1/'))).toEqual([]);
    expect(await clickCookie()).toBeUndefined();
    expect(await stored(page)).toBeNull();

    // Given: the click is stored, and what waited is sent (the page view first).
    await page.evaluate(() => (globalThis as unknown as InPage).lf('consent', true));
    // Both are sent at once (keepalive fetches): they may arrive in either order.
    const rows = byType(await eventsOnceThere(brand.brandId, 2));
    expect(rows.map((r) => [r.type, r.data.clickRef])).toEqual([
      ['page.viewed', brand.clickRef],
      ['order.observed', brand.clickRef],
    ]);
    expect((await clickCookie())?.value).toBe(brand.clickRef);
    expect(await stored(page)).toBe(brand.clickRef);

    // Withdrawn: cookie and storage deleted, later calls send nothing.
    await page.evaluate(() => (globalThis as unknown as InPage).lf('consent', false));
    // The page's cookie write reaches the browser's cookie store asynchronously.
    await expect.poll(clickCookie).toBeUndefined();
    expect(await stored(page)).toBeNull();
    await page.evaluate(() =>
      (globalThis as unknown as InPage).lf('observe', { order_id: 'ord-after-refusal', amount: 1 }),
    );
    // A new page waits for consent again and finds nothing stored.
    await page.goto(`${shop}/next`);
    await scriptLoaded(page);
    await page.waitForTimeout(300);
    expect(sent).toHaveLength(2);
    expect(await storedEvents(brand.brandId)).toHaveLength(2);
    expect(await clickCookie()).toBeUndefined();
    expect(errors).toEqual([]);
  });

  it('a page on an unregistered origin is refused by CORS (403) and nothing is stored', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live });
    const { page, errors } = await openPage();
    const failed = page.waitForEvent('requestfailed', (r) => r.url() === `${api}/v1/events`);
    await page.goto(`${stranger}/landing?lf_click=${brand.clickRef}`);
    await failed;
    // The preflight carries no key: it is refused because no brand registered this origin.
    expect(received).toContain(`OPTIONS /v1/events ${stranger} → 403`);
    expect(received.filter((r) => r.startsWith('POST'))).toEqual([]);
    expect(await storedEvents(brand.brandId)).toEqual([]);
    // A failed send is swallowed: not even an unhandled rejection.
    expect(errors).toEqual([]);
  });

  it('a host page whose own scripts throw is still tracked, and lf.js throws nothing, whatever the page does to it', async () => {
    const brand = await newShop();
    pageFor = (path) =>
      path === '/hostile'
        ? // Storage and cookies blocked, fetch broken: lf.js does nothing, silently.
          html({
            key: brand.keys.pk_live,
            before: `<script>
              Object.defineProperty(window, 'localStorage', { get() { throw new Error('storage blocked'); } });
              Object.defineProperty(document, 'cookie', { get() { throw new Error('cookies blocked'); }, set() { throw new Error('cookies blocked'); } });
              window.fetch = function () { throw new Error('fetch blocked'); };
            </script>`,
          })
        : html({
            key: brand.keys.pk_live,
            before: `<script>throw new Error('host script before');</script>`,
            after: `<script>notDefinedByTheHost();</script>`,
          });
    const { page, errors } = await openPage();
    await page.goto(`${shop}/broken?lf_click=${brand.clickRef}`);
    const [row] = await eventsOnceThere(brand.brandId, 1);
    expect(row!.data).toMatchObject({ path: '/broken', clickRef: brand.clickRef });
    // Calls a page may get wrong.
    await page.evaluate(() => {
      const lf = (globalThis as unknown as InPage).lf;
      lf();
      lf('observe');
      lf('observe', null);
      lf('nonsense', 1);
      lf('observe', {
        get order_id() {
          throw new Error('getter');
        },
      });
    });
    await page.goto(`${shop}/hostile?lf_click=${brand.clickRef}`);
    await scriptLoaded(page);
    await page.evaluate(() =>
      (globalThis as unknown as InPage).lf('observe', { order_id: 'ord-hostile', amount: 1 }),
    );
    await page.waitForTimeout(200);
    expect(errors).toEqual(['host script before', 'notDefinedByTheHost is not defined']);
    expect(await storedEvents(brand.brandId)).toHaveLength(1);
  });

  it("lf('observe') called through the stub before the script loaded is replayed", async () => {
    const brand = await newShop();
    pageFor = () =>
      html({
        key: brand.keys.pk_live,
        before: `<script>
          window.lf = window.lf || function () { (window.lf.q = window.lf.q || []).push(arguments) };
          lf('observe', { order_id: 'ord-queued', amount: 4500, currency: 'KRW' });
          window.queuedBeforeLoad = !lf.loaded && lf.q.length === 1;
        </script>`,
      });
    const { page, errors } = await openPage();
    await page.goto(`${shop}/thanks`);
    const rows = byType(await eventsOnceThere(brand.brandId, 2));
    expect(await page.evaluate(() => (globalThis as unknown as InPage).queuedBeforeLoad)).toBe(true);
    expect(rows.map((r) => [r.type, r.order_id])).toEqual([
      ['page.viewed', null],
      ['order.observed', 'ord-queued'],
    ]);
    expect(rows[1]!.data).toMatchObject({ amount: 4500, currency: 'KRW' });
    expect(errors).toEqual([]);
  });

  it('a navigation right after observe does not drop it (keepalive)', async () => {
    const brand = await newShop();
    pageFor = () => html({ key: brand.keys.pk_live });
    // Preflights (never cached in a new context) take a while: the page is gone long before the
    // POST can leave, which only a keepalive request survives.
    preflightDelayMs = 1500;
    const { page, errors } = await openPage();
    await page.goto(`${shop}/thanks`);
    await scriptLoaded(page);
    await page.evaluate(() => {
      (globalThis as unknown as InPage).lf('observe', {
        order_id: 'ord-leaving',
        amount: 990,
        currency: 'KRW',
      });
      (globalThis as unknown as InPage).location.href = '/next';
    });
    await page.waitForURL(`${shop}/next`);
    expect(received.filter((r) => r.startsWith('POST'))).toEqual([]);
    // Both pages' views and the observation arrive.
    const rows = await eventsOnceThere(brand.brandId, 3);
    expect(rows.filter((r) => r.type === 'order.observed').map((r) => r.order_id)).toEqual(['ord-leaving']);
    expect(errors).toEqual([]);
  });
});
