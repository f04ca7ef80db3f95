import helmet from 'helmet';

/**
 * helmet as the service configures it, for every response, errors included. Most responses are
 * JSON (nothing to run or frame); /docs and Bull Board set their own CSP. Referrer-Policy and
 * COOP are left out so the click redirect hands the creator's page on to the shop as before.
 * See docs/decisions.md. No nonces or functions: app.ts sets these headers as recorded once
 * (http/fixed-headers.ts).
 */
export const securityHeaderPolicy = () =>
  helmet({
    contentSecurityPolicy: {
      useDefaults: false,
      directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] },
    },
    xFrameOptions: { action: 'deny' },
    referrerPolicy: false,
    crossOriginOpenerPolicy: false,
  });

/** Brands' shops call /v1 (CORS decides who may read it) and load /lf.js with <script src>. */
export const crossOriginReadablePolicy = () => helmet.crossOriginResourcePolicy({ policy: 'cross-origin' });
