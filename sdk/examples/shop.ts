/**
 * A shop in one file, wired as README "Tracking a sale end to end" describes: lf.js on every
 * page, `lfClick()` keeping the landing URL's `lf_click` in an HttpOnly cookie, `order.paid`
 * sent from the server with the SDK, and `lf('observe', …)` on the thank-you page.
 *
 *   LF_SECRET_KEY=sk_test_… LF_PUBLISHABLE_KEY=pk_test_… npm run demo:shop
 *
 * then open http://localhost:5173/?lf_click=<a click_ref from the npm run dev banner>.
 * In your own shop, import from '@lf/sdk' instead of '../src/index.js'.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import express from 'express';
import { LfApiError, LfClient, lfClick } from '../src/index.js';

export interface ShopConfig {
  /** The service, e.g. http://127.0.0.1:3000: where lf.js and the API live. */
  apiUrl: string;
  /** Stays on the server: sends order.paid. */
  secretKey: string;
  /** Goes into the page: lf.js sends page.viewed and order.observed with it. */
  publishableKey: string;
}

const PRICE = 39000; // KRW, in won

/** Text for HTML, and JSON for an inline script (`<` escaped, so `</script>` cannot end it). */
const html = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c');

function page(config: ShopConfig, title: string, body: string, script = ''): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${html(title)}</title>
<script>window.lf = window.lf || function () { (window.lf.q = window.lf.q || []).push(arguments) };</script>
<script async src="${html(config.apiUrl)}/lf.js" data-key="${html(config.publishableKey)}"></script>
${script}
</head>
<body>
<h1>${html(title)}</h1>
${body}
</body>
</html>`;
}

export function createShop(config: ShopConfig): express.Express {
  const lf = new LfClient({ apiKey: config.secretKey, baseUrl: config.apiUrl });
  const shop = express();

  // 1. Every request: a landing URL's lf_click goes into an HttpOnly cookie for 13 months;
  //    req.lfClickRef carries it (from the URL or the cookie) to checkout.
  shop.use(lfClick());
  shop.use(express.urlencoded({ extended: false }));

  shop.get('/', (_req, res) => {
    res
      .type('html')
      .send(
        page(
          config,
          'Hydrating serum 30 ml',
          `<p>39,000 KRW</p><form method="post" action="/checkout"><button>Buy now</button></form>`,
        ),
      );
  });

  // 2. Payment succeeded: tell the service from the server, with the click the buyer came from.
  shop.post('/checkout', async (req, res) => {
    const orderId = `DEMO-${randomUUID().slice(0, 8)}`;
    try {
      const event = await lf.events.send({
        type: 'order.paid',
        data: {
          order_id: orderId,
          amount: PRICE,
          currency: 'KRW',
          ...(req.lfClickRef && { click_ref: req.lfClickRef }),
        },
      });
      const query = new URLSearchParams({ order_id: orderId, attribution: event.attribution.status });
      res.redirect(303, `/thanks?${query}`);
    } catch (error) {
      // The SDK already retried what could be retried; what is left needs a person.
      const detail =
        error instanceof LfApiError ? `${error.code} (request ${error.requestId})` : String(error);
      res.status(502).type('text').send(`Order ${orderId} was paid but not recorded: ${detail}`);
    }
  });

  // 3. Thank-you page: the browser reports what it saw, so missing server sends show up.
  shop.get('/thanks', (req, res) => {
    const orderId = String(req.query.order_id ?? '');
    const attribution = String(req.query.attribution ?? '');
    res
      .type('html')
      .send(
        page(
          config,
          'Thank you',
          `<p>Order <code>${html(orderId)}</code> is paid (${html(attribution)}).</p>`,
          `<script>lf('observe', ${scriptJson({ order_id: orderId, amount: PRICE, currency: 'KRW' })});</script>`,
        ),
      );
  });
  return shop;
}

// Run directly (npm run demo:shop): configuration from the environment.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { LF_SECRET_KEY, LF_PUBLISHABLE_KEY } = process.env;
  if (!LF_SECRET_KEY?.startsWith('sk_') || !LF_PUBLISHABLE_KEY?.startsWith('pk_')) {
    console.error(
      'demo:shop needs LF_SECRET_KEY (sk_test_…) and LF_PUBLISHABLE_KEY (pk_test_…): copy them from the `npm run dev` banner.',
    );
    process.exit(64);
  }
  const apiUrl = (process.env.LF_API_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, '');
  const port = Number(process.env.SHOP_PORT ?? 5173);
  createShop({ apiUrl, secretKey: LF_SECRET_KEY, publishableKey: LF_PUBLISHABLE_KEY }).listen(port, () => {
    console.log(`Demo shop on http://localhost:${port} (the demo brand's allowed origin), API ${apiUrl}.`);
    console.log(
      `Land as a creator's follower: http://localhost:${port}/?lf_click=<click_ref from the banner>`,
    );
  });
}
