import express, { Router } from 'express';
import { sessionUrl } from './db/connections.js';
import { useNamedStatements } from './db/fast-path/index.js';
import { LagTolerantReads } from './db/lag-tolerant-reads.js';
import type { AppDeps } from './deps.js';
import { addressLimitsFor } from './http/address-limits.js';
import { requireAdmin } from './http/admin-auth.js';
import { answerPreflight, authenticateApiKey } from './http/api-auth.js';
import { bodyByKey } from './http/body-by-key.js';
import { clientAddressOf } from './http/client-address.js';
import { serveDirect } from './http/direct-routes.js';
import { errorHandler, routeNotFound } from './http/error-handler.js';
import { fixedHeaders } from './http/fixed-headers.js';
import { hostName, requireHost } from './http/host-check.js';
import { jsonBody } from './http/json-body.js';
import { assignRequestId } from './http/request-id.js';
import { logRequests } from './http/request-log.js';
import { type AnyRoute, mountRoutes, routeHandler } from './http/route.js';
import { refuseCrossOrigin } from './http/same-origin.js';
import { crossOriginReadablePolicy, securityHeaderPolicy } from './http/security-headers.js';
import { adminRoutes } from './modules/admin/admin.routes.js';
import { clickRedirectRoutes } from './modules/attribution/click-redirect.routes.js';
import { browserScriptRoutes } from './modules/browser-script/browser-script.routes.js';
import { creatorRoutes } from './modules/creators/creators.routes.js';
import { eventRoutes } from './modules/events/events.routes.js';
import { explanationRoutes } from './modules/explanations/explanations.routes.js';
import { Ingestion } from './modules/ingestion/ingestion.js';
import { integrationRoutes } from './modules/integration/integration.routes.js';
import { keyIssuanceRoutes } from './modules/keys/issuance.routes.js';
import { KeyCache } from './modules/keys/key-cache.js';
import { authenticateLoginToken, loginTokenVerifier } from './modules/keys/login-token.js';
import { pingRoutes } from './modules/keys/ping.routes.js';
import { orderRoutes } from './modules/orders/orders.routes.js';
import { payoutRoutes } from './modules/payouts/payouts.routes.js';
import { programRoutes } from './modules/programs/programs.routes.js';
import {
  reconciliationRoutes,
  reconciliationUploadBody,
} from './modules/reconciliations/reconciliations.routes.js';
import { reportRoutes } from './modules/reports/reports.routes.js';
import { webhookAdminRoutes } from './modules/webhooks/webhooks.admin-routes.js';
import { webhookRoutes } from './modules/webhooks/webhooks.routes.js';
import { docsRoutes } from './openapi/docs.routes.js';
import { mountBullBoard } from './ops/bull-board.js';
import { mountHealth } from './ops/health.routes.js';
import { createMetrics } from './ops/metrics.js';

export type { AppDeps };

/** Every public route, in one list: the router and the OpenAPI document both read it. */
export function publicApiRoutes(deps: AppDeps): AnyRoute[] {
  return [
    ...pingRoutes,
    ...eventRoutes(deps),
    ...orderRoutes(deps),
    ...payoutRoutes(deps),
    ...creatorRoutes(deps),
    ...programRoutes(deps),
    ...reportRoutes(deps),
    ...explanationRoutes(deps),
    ...integrationRoutes(deps),
    ...webhookRoutes(deps),
    ...reconciliationRoutes(deps),
  ];
}

export function buildApp(appDeps: AppDeps): express.Express {
  const deps = {
    ...appDeps,
    metrics: appDeps.metrics ?? createMetrics(appDeps.queues, appDeps.orm),
    ingestion: appDeps.ingestion ?? new Ingestion(appDeps),
    reads:
      appDeps.reads ??
      new LagTolerantReads(appDeps.orm, {
        replicaUrl: appDeps.config.DATABASE_REPLICA_URL,
        poolMax: appDeps.config.DATABASE_REPLICA_POOL_MAX,
        logger: appDeps.logger,
      }),
  };
  const { config, orm, logger, metrics } = deps;
  useNamedStatements(config.DATABASE_PREPARED_STATEMENTS);
  const app = express();
  app.disable('x-powered-by');
  // The same hop count as the per-address limits' client address (http/client-address.ts).
  app.set('trust proxy', config.TRUST_PROXY_HOPS);
  // API answers are live data, never revalidated: no hash of every body for an ETag. The script
  // and the API document, which are cached, set their own (http/precompressed.ts).
  app.set('etag', false);
  // First, so every response has them, errors included (http/security-headers.ts).
  const securityHeaders = fixedHeaders(securityHeaderPolicy());
  app.use(securityHeaders);
  // The script's routes set it on /lf.<version>.js as well.
  const crossOriginReadable = fixedHeaders(crossOriginReadablePolicy());
  app.use(['/v1', '/lf.js'], crossOriginReadable);
  // The key cache holds a LISTEN connection and the engine its own pool: `app.locals.close()`
  // (after the server stopped accepting) ends what buildApp made.
  const keyCache = deps.keyCache ?? new KeyCache({ databaseUrl: sessionUrl(config), orm, logger });
  app.locals.close = async () => {
    if (deps.ingestion !== appDeps.ingestion) await deps.ingestion.close();
    if (keyCache !== deps.keyCache) await keyCache.close();
    if (deps.reads !== appDeps.reads) await deps.reads.close();
  };

  const everyRequest = [assignRequestId, logRequests(logger), metrics.observeHttp];
  app.use(everyRequest);
  // Health on every host (load balancers may call by IP); metrics behind the ops credentials.
  const ops = Router();
  mountHealth(ops, deps);
  ops.get('/metrics', requireAdmin(config.ADMIN_TOKEN, { browser: true }), async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  app.use(ops);

  const MiB = 1024 * 1024;

  // The auth host serves key issuance only; anything else there falls through to the host check.
  const issuanceRoutes = keyIssuanceRoutes(deps);
  const authHosts = new Set(config.AUTH_HOSTS);
  if (authHosts.size > 0) {
    const authHost = Router();
    authHost.use((req, _res, next) => next(authHosts.has(hostName(req.headers.host)) ? undefined : 'router'));
    // Any Content-Type, as on /v1: the login JWT is a Bearer header, which no browser sends on its
    // own. The token is checked first: a request refused on it is answered without its body read.
    mountRoutes(authHost, issuanceRoutes, [
      authenticateLoginToken(loginTokenVerifier(config)),
      jsonBody(MiB),
    ]);
    app.use(authHost);
  }

  const apiHost = requireHost(
    [...config.API_HOSTS, ...config.TEST_API_HOSTS],
    config.API_HOSTS,
    config.TEST_API_HOSTS,
  );
  app.use(apiHost);

  const publicRoutes = publicApiRoutes(deps);
  const adminApiRoutes = [...adminRoutes(deps), ...webhookAdminRoutes(deps)];
  const openRoutes = clickRedirectRoutes(deps);
  const documented = [...publicRoutes, ...issuanceRoutes, ...adminApiRoutes, ...openRoutes];

  // What a /v1 route runs before its own handler, in both lanes: express's router here and the
  // event routes' direct lane below (test/integration/direct-routes.test.ts checks they match).
  // The key first, from the headers alone: a request refused on it (or on its address's invalid
  // keys) is answered before a byte of its body is read, and the body's limits are the key's.
  const eventBatchBody = jsonBody(10 * MiB);
  const body = jsonBody(MiB);
  // A JSON reconciliation's 10,000 rows; a CSV one is streamed by its handler.
  const reconciliationBody = reconciliationUploadBody(eventBatchBody);
  const bodyOf = (def: AnyRoute) =>
    def.path === '/v1/events/batch'
      ? eventBatchBody
      : def.path === '/v1/reconciliations' && def.method === 'post'
        ? reconciliationBody
        : body;
  const apiKey = authenticateApiKey(
    keyCache,
    addressLimitsFor(deps),
    clientAddressOf(config.TRUST_PROXY_HOPS),
  );
  const v1Handlers = new Map(
    publicRoutes.map((def) => [def, [apiKey, bodyByKey(bodyOf(def), def.refusePublishableKey)]]),
  );
  // Only public routes are asked for (a route missing here fails the boot, never runs unauthenticated).
  const beforeV1Route = (def: AnyRoute) => v1Handlers.get(def)!;
  const preflight = answerPreflight(keyCache);
  const v1 = Router();
  v1.use('/v1', preflight);
  mountRoutes(v1, publicRoutes, beforeV1Route);
  app.use(v1);

  // The ops surface is opened in a browser, which keeps its Basic credentials and sends them on
  // its own: requests another origin's pages make are refused, a body must be typed
  // application/json (a form cannot say so), and the admin API takes the Bearer token only
  // (http/same-origin.ts, http/admin-auth.ts; docs/decisions.md, "CSRF on the ops surface").
  const admin = Router();
  const adminBody = jsonBody(MiB, { jsonOnly: true });
  admin.use('/admin', refuseCrossOrigin);
  admin.use('/admin/api', requireAdmin(config.ADMIN_TOKEN), adminBody);
  // Bull Board's own JSON parser then finds the body read.
  admin.use('/admin/queues', requireAdmin(config.ADMIN_TOKEN, { browser: true }), adminBody);
  mountBullBoard(admin, deps);
  mountRoutes(admin, adminApiRoutes);
  app.use(admin);

  const open = Router();
  mountRoutes(open, [...openRoutes, ...browserScriptRoutes(), ...docsRoutes(config, documented)]);
  app.use(open);

  app.use(routeNotFound);
  const answerError = errorHandler(config.PUBLIC_BASE_URL, logger);
  app.use(answerError);

  // The event routes skip express's router: the handlers it runs for them, in its order (a POST
  // matches no health route), see http/direct-routes.ts; test/integration/direct-routes.test.ts
  // walks express's stack and fails when the two lists differ.
  const eventIntake = publicRoutes.filter(
    (r) => r.method === 'post' && (r.path === '/v1/events' || r.path === '/v1/events/batch'),
  );
  const directRoutes = eventIntake.map((def) => ({
    path: def.path,
    handlers: [
      securityHeaders,
      crossOriginReadable,
      ...everyRequest,
      apiHost,
      preflight,
      ...beforeV1Route(def),
      routeHandler(def),
    ],
  }));
  app.locals.directRoutes = directRoutes;
  serveDirect(app, directRoutes, answerError, {
    skip: (req) => authHosts.has(hostName(req.headers.host)),
    logger,
  });
  return app;
}
