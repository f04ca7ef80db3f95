import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { Worker } from 'bullmq';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JobName } from '../../src/jobs/queues.js';
import { eventTypes } from '../../src/modules/events/events.schemas.js';
import { createRedis } from '../../src/redis.js';
import { errorCodes } from '../../src/shared/errors.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The pages ops and integrators open in a browser still work under their Content-Security-Policy:
 * rendered, and not one `securitypolicyviolation`. Needs Debian's chromium (`apt-get install -y chromium`);
 * without it the file is skipped locally and fails in CI (.ci/run installs it).
 */
const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const haveChromium = existsSync(chromiumPath);
const skip = !haveChromium && !process.env.CI;
if (skip) {
  console.warn(
    `test/browser/ops-pages.test.ts SKIPPED: no chromium at ${chromiumPath}. Install it (apt-get install -y chromium) or set CHROMIUM_PATH; in CI this file fails instead.`,
  );
}

interface Seen {
  /** `securitypolicyviolation` events of every document the page showed, and CSP console errors. */
  violations: string[];
  console: string[];
  errors: string[];
  /** Every response the app sent while the page rendered: documents, scripts, styles, JSON, worker. */
  responses: Promise<{ url: string; headers: Record<string, string> }>[];
}

/** The few browser globals the in-page functions below use (the tsconfig has no DOM lib). */
interface InPage {
  document: {
    addEventListener(
      type: 'securitypolicyviolation',
      listener: (e: {
        effectiveDirective: string;
        blockedURI: string;
        sourceFile: string;
        lineNumber: number;
      }) => void,
    ): void;
  };
  getComputedStyle(element: unknown): { backgroundColor: string; display: string };
  __reportCsp?: (violation: string) => void;
}

let ctx: TestContext;
let server: Server;
let base: string;
let browser: Browser;
/** Another site (another port, so another origin) whose page frames one of ours: `/?path=/docs`. */
let framerServer: Server;
let framer: string;

/**
 * Redoc draws /docs in about 2 s on an idle machine, but this file runs beside three others on
 * 2 cores: the waits are for a hang, not a pace, and end as soon as the page is drawn.
 */
const DRAWN_WITHIN = 90_000;

beforeAll(async () => {
  if (skip) return;
  if (!haveChromium)
    throw new Error(`CI is set but there is no chromium at ${chromiumPath}: .ci/run installs it`);
  ctx = await createTestApp();
  server = ctx.app.listen(0, '127.0.0.1');
  await new Promise<void>((done) => server.once('listening', done));
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  framerServer = createServer((req, res) => {
    const path = new URL(req.url ?? '/', base).searchParams.get('path') ?? '/';
    res.setHeader('Content-Type', 'text/html; charset=utf-8');
    res.end(`<!doctype html><iframe src="${base}${path}"></iframe>`);
  }).listen(0, '127.0.0.1');
  await new Promise<void>((done) => framerServer.once('listening', done));
  framer = `http://127.0.0.1:${(framerServer.address() as { port: number }).port}`;
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
});
afterAll(async () => {
  await browser?.close();
  if (server) await new Promise((done) => server.close(done));
  if (framerServer) await new Promise((done) => framerServer.close(done));
  await ctx?.close();
});

/** One job of `name` run by a throwaway worker and failed, so the board has a stack trace to show. */
async function failOneJob(name: JobName) {
  const queue = ctx.queues[name];
  const connection = createRedis(ctx.config.REDIS_URL, { worker: true });
  const worker = new Worker(
    name,
    async () => {
      throw new Error('browser check failure');
    },
    { connection, prefix: queue.opts.prefix },
  );
  const failed = new Promise((done) => worker.once('failed', done));
  await queue.add(name, { request_id: 'req_browser_check', triggered_by: 'admin' }, { attempts: 1 });
  await failed;
  await worker.close();
  await connection.quit();
}

/** A browser context in which every document reports its CSP violations to `__reportCsp`. */
async function openContext(options: Parameters<Browser['newContext']>[0] = {}) {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(DRAWN_WITHIN);
  // Nothing off this host is reachable here (Bull Board asks Google for fonts): fail such requests
  // at once. CSP is checked by the renderer before a request leaves, so this hides no violation.
  await context.route(
    (url) => url.origin !== base && url.origin !== framer,
    (route) => route.abort(),
  );
  await context.addInitScript(() => {
    // Looked up per event: the page's binding may be installed after this script ran.
    const page = globalThis as unknown as InPage;
    page.document.addEventListener('securitypolicyviolation', (e) =>
      page.__reportCsp?.(
        `${e.effectiveDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`,
      ),
    );
  });
  return context;
}

/** A page of `context` whose violations, console, page errors and responses from the app are recorded. */
async function watchedPage(context: BrowserContext): Promise<{ page: Page; seen: Seen }> {
  const page = await context.newPage();
  const seen: Seen = { violations: [], console: [], errors: [], responses: [] };
  await page.exposeFunction('__reportCsp', (violation: string) => seen.violations.push(violation));
  page.on('response', (r) => {
    if (r.url().startsWith(base))
      seen.responses.push(r.allHeaders().then((headers) => ({ url: r.url(), headers })));
  });
  page.on('console', (m) => {
    seen.console.push(`${m.type()}: ${m.text()}`);
    if (/Content.Security.Policy/i.test(m.text())) seen.violations.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => seen.errors.push(String(e)));
  page.on('worker', (worker) =>
    worker.on('console', (m) => {
      if (/Content.Security.Policy/i.test(m.text())) seen.violations.push(`worker console: ${m.text()}`);
    }),
  );
  return { page, seen };
}

async function expectNoViolations(page: Page, seen: Seen) {
  // Violation events are queued as tasks: give the last ones time to arrive.
  await page.waitForTimeout(250);
  expect(seen.violations, seen.console.join('\n')).toEqual([]);
  expect(seen.errors).toEqual([]);
}

/** Each response the page loaded from the app: no sniffing, no framing, no banner. */
async function expectAllProtected(seen: Seen, atLeast: number) {
  const responses = await Promise.all(seen.responses);
  expect(responses.length).toBeGreaterThanOrEqual(atLeast);
  for (const { url, headers } of responses) {
    expect(headers['x-content-type-options'], url).toBe('nosniff');
    expect(headers['x-frame-options'], url).toBe('DENY');
    expect(headers['x-powered-by'], url).toBeUndefined();
  }
  return responses;
}

/** Another site frames `path`: the browser must refuse to render it there. */
async function renderedInForeignFrame(context: BrowserContext, path: string): Promise<boolean> {
  const page = await context.newPage();
  await page.goto(`${framer}/?path=${encodeURIComponent(path)}`);
  const frame = page.frames().find((f) => f !== page.mainFrame());
  await frame?.waitForLoadState().catch(() => {});
  const rendered = frame?.url().startsWith(base) === true && (await frame.locator('body *').count()) > 0;
  await page.close();
  return rendered;
}

describe.skipIf(skip)('pages under their CSP in Chromium', { timeout: 2 * DRAWN_WITHIN }, () => {
  let context: BrowserContext | undefined;
  afterEach(() => context?.close());

  it('/docs: Redoc draws the guide, every event type and error code and the operations, no CSP violation, not framable', async () => {
    context = await openContext();
    const { page, seen } = await watchedPage(context);
    const res = await page.goto(`${base}/docs`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    await page.waitForSelector('html[data-rendered="true"]', { timeout: DRAWN_WITHIN });
    if (process.env.DOCS_SCREENSHOT) await page.screenshot({ path: process.env.DOCS_SCREENSHOT });

    // The guide's tables: each event type with its key and required fields, each error code.
    const text = (await page.locator('#redoc').textContent()) ?? '';
    for (const type of eventTypes) expect(text, type).toContain(type);
    for (const code of Object.keys(errorCodes)) expect(text, code).toContain(code);
    const paidRow = page.locator('tr', { has: page.locator('code', { hasText: /^order\.paid$/ }) }).first();
    expect(await paidRow.textContent()).toContain('order_id, amount');
    // Operations with their curl and SDK samples, and a request body per event type.
    await expect.poll(() => page.locator('h2', { hasText: 'Send one event' }).isVisible()).toBe(true);
    expect(text).toContain('curl');
    expect(text).toContain('Node SDK');
    expect(text).toContain('lf.events.send');
    expect(text).toContain('OrderPaidData');

    await expectNoViolations(page, seen);
    const loaded = await expectAllProtected(seen, 3);
    expect(loaded.map((r) => new URL(r.url).pathname)).toEqual(
      expect.arrayContaining(['/docs', '/openapi.json', expect.stringMatching(/^\/docs\/redoc-/)]),
    );
    expect(await renderedInForeignFrame(context, '/docs')).toBe(false);
  });

  it("an error's doc_url opens /docs at that code's row", async () => {
    const answer = await fetch(`${base}/v1/ping`);
    const { error } = (await answer.json()) as { error: { code: string; doc_url: string } };
    expect(error.code).toBe('invalid_api_key');
    const url = new URL(error.doc_url);
    expect(url.hash).toBe('#error-invalid_api_key');
    context = await openContext();
    const { page, seen } = await watchedPage(context);
    await page.goto(`${base}/docs${url.hash}`);
    await page.waitForSelector('html[data-rendered="true"]', { timeout: DRAWN_WITHIN });
    const row = page.locator('tr.lf-target');
    await expect.poll(() => row.count()).toBe(1);
    expect(await row.textContent()).toContain('invalid_api_key');
    await expect.poll(() => row.isVisible()).toBe(true);
    expect(
      await row.evaluate((el) => {
        const box = (
          el as unknown as { getBoundingClientRect(): { top: number; bottom: number } }
        ).getBoundingClientRect();
        return box.top >= 0 && box.bottom <= (globalThis as unknown as { innerHeight: number }).innerHeight;
      }),
    ).toBe(true);
    await expectNoViolations(page, seen);
  });

  it('Bull Board (ops login) lists every queue and shows a failed job, no CSP violation, not framable', async () => {
    await failOneJob('integration-status');
    context = await openContext({
      httpCredentials: { username: 'ops', password: ADMIN_TOKEN, origin: base },
    });
    const { page, seen } = await watchedPage(context);
    const res = await page.goto(`${base}/admin/queues`);
    expect(res?.status()).toBe(200);

    // The overview: every queue, drawn by React from the board's JSON API.
    for (const name of Object.keys(ctx.queues)) {
      await expect
        .poll(() => page.getByText(name, { exact: true }).first().isVisible(), { timeout: DRAWN_WITHIN })
        .toBe(true);
    }
    // A failed job's stack trace, highlighted by the board's web worker (worker-src).
    await page.goto(`${base}/admin/queues/queue/integration-status?status=failed`);
    await page.getByText('Error', { exact: true }).first().click();
    await expect
      .poll(() => page.getByText('browser check failure').first().isVisible(), { timeout: DRAWN_WITHIN })
      .toBe(true);

    await expectNoViolations(page, seen);
    // The pages, their scripts and styles, the board's JSON API and the highlight worker.
    const responses = await expectAllProtected(seen, 6);
    expect(responses.some((r) => /highlight-worker/.test(r.url))).toBe(true);
    expect(await renderedInForeignFrame(context, '/admin/queues')).toBe(false);
  });

  it("a hidden text/plain form on another site's page, with ops signed in to Bull Board: refused, nothing created; Bull Board's own actions still work", async () => {
    const json = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const made = await fetch(`${base}/admin/api/brands`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ name: 'CSRF target' }),
    });
    const hooks = `${base}/admin/api/brands/${((await made.json()) as { id: string }).id}/webhook_endpoints`;
    const endpoints = async () =>
      ((await (await fetch(hooks, { headers: json })).json()) as { data: [] }).data;
    const queue = ctx.queues['integration-status'];

    context = await openContext({
      httpCredentials: { username: 'ops', password: ADMIN_TOKEN, origin: base },
    });
    const { page, seen } = await watchedPage(context);
    // The operator opened Bull Board: the browser now holds Basic credentials for this host.
    expect((await page.goto(`${base}/admin/queues`))?.status()).toBe(200);
    // Its own actions are fetches from its page (same-origin), with those credentials: they work.
    const paused = await page.evaluate(
      async () =>
        (await fetch('/admin/queues/api/queues/integration-status/pause', { method: 'PUT' })).status,
    );
    expect(paused).toBe(200);
    expect(await queue.isPaused()).toBe(true);
    await queue.resume();
    await expectNoViolations(page, seen);

    // What the review describes: the JSON as the name of a hidden field, posted as text/plain on
    // load, from another site (localhost is not 127.0.0.1's site) and from a sibling origin
    // (another port: same-site), to the admin API and to a Bull Board action.
    const field = JSON.stringify({
      url: 'https://hooks.example.com/stolen',
      enabled_events: ['*'],
      livemode: true,
      description: '',
    });
    const forms = {
      hook: hooks,
      job: `${base}/admin/queues/api/queues/integration-status/add`,
    };
    const jobsBefore = await queue.count();
    const framerPort = (framerServer.address() as { port: number }).port;
    for (const [attacker, site] of [
      [`http://localhost:${framerPort}`, 'cross-site'],
      [framer, 'same-site'],
    ] as const) {
      await context.route(`${attacker}/attack/*`, (route) => {
        const action = forms[new URL(route.request().url()).pathname.split('/')[2] as keyof typeof forms];
        return route.fulfill({
          contentType: 'text/html; charset=utf-8',
          body: `<!doctype html><form method="post" enctype="text/plain" action="${action}"><input type="hidden" name='${field.slice(0, -2)}' value='"}'></form><script>document.forms[0].submit()</script>`,
        });
      });
      for (const [target, action] of Object.entries(forms)) {
        const attack = await context.newPage();
        const answered = attack.waitForResponse((r) => r.url() === action);
        await attack.goto(`${attacker}/attack/${target}`);
        const answer = await answered;
        const what = `${site} ${target}`;
        expect((await answer.request().allHeaders())['content-type'], what).toBe('text/plain');
        expect(answer.status(), what).toBe(403);
        // Refused by what the browser said of the page (Fetch Metadata, which playwright does not list).
        const { error } = (await answer.json()) as { error: { code: string; message: string } };
        expect(error.code, what).toBe('cross_origin_request_not_allowed');
        expect(error.message, what).toContain(`Sec-Fetch-Site: ${site}`);
        await attack.close();
      }
    }
    expect(await endpoints()).toEqual([]);
    expect(await queue.count()).toBe(jobsBefore);
  });
});
