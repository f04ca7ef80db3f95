import { defineConfig } from 'vitest/config';
import { citusUnavailable } from './test/setup/citus.js';

/**
 * `npm run test:citus` (issue 37): the API and engine tests against a real Citus cluster (a
 * coordinator and two workers), each file on a database of its own distributed by brand
 * (test/setup/citus.ts). Where no cluster can be had, it says so and how to point it at one,
 * and passes: `npm test` on plain PostgreSQL stays the default.
 */
export const citusFiles = [
  'test/integration/events.test.ts',
  'test/integration/orders-read.test.ts',
  'test/integration/ledger-properties.test.ts',
  'test/integration/brand-keys.test.ts',
  'test/integration/key-cache.test.ts',
  'test/integration/click-redirect.test.ts',
  'test/integration/single-shard.test.ts',
  // Every hot statement one routed task by EXPLAIN (the write's: its call, delegated to the brand's worker).
  'test/integration/citus-explain.test.ts',
  // Stored statements made by migrations, those named by a brand distributed by it.
  'test/integration/release-statements.test.ts',
  'test/integration/citus-migration.test.ts',
  'test/integration/jobs-outbox.test.ts',
  // A worker stopped on a cluster of the file's own: the API's answer meanwhile (point 5).
  'test/integration/citus-availability.test.ts',
  // A brand's statements on its shards where they are; a shard move waits for its transaction.
  'test/integration/citus-brand-shards.test.ts',
  // A brand's shards moved by logical replication, split and isolated under its events: nothing
  // acknowledged lost or counted twice.
  'test/integration/citus-shard-moves.test.ts',
  // Commission program versions, creator tiers, the preview and the tier job; reconciliations (staging,
  // comparison and differences distributed by brand).
  'test/integration/commission-program-versions.test.ts',
  'test/integration/commission-preview.test.ts',
  'test/integration/creator-tiers-job.test.ts',
  // Pricing with the pinned version in the engine; the creator-month rows locked on the brand's shards.
  'test/integration/commission-engine.test.ts',
  'test/integration/commission-engine-properties.test.ts',
  // A priced brand's tiers and creator-months read with the load, or by their own statement.
  'test/integration/program-rows-with-load.test.ts',
  // Recalculations: each chunk's statements on the brand's shards, through the engine.
  'test/integration/commission-recalculations.test.ts',
  'test/integration/reconciliations.test.ts',
  // A single-node database given the extension afterwards: npm run migrate distributes it (point 5).
  'test/integration/citus-catch-up.test.ts',
  // Every table registered with its kind; an unregistered one refused by npm run migrate.
  'test/integration/table-registry.test.ts',
  // Work across brands (issue 37, point 3): per brand on Citus, or statements it can plan.
  'test/integration/payouts.test.ts',
  // Its staged races watch the coordinator's lock waits: plain PostgreSQL only.
  'test/integration/payouts-reruns.test.ts',
  'test/integration/payouts-api.test.ts',
  'test/integration/reports.test.ts',
  'test/integration/report-backlog.test.ts',
  'test/integration/creators-api.test.ts',
  'test/integration/settlement-properties.test.ts',
  'test/integration/attribution-explanation.test.ts',
  'test/integration/integration.test.ts',
  'test/integration/jobs-retries.test.ts',
  'test/integration/queue-reconciler.test.ts',
  'test/integration/test-data-deletion.test.ts',
  'test/integration/bounded-tables.test.ts',
  'test/integration/webhooks.test.ts',
  'test/integration/webhooks-delivery.test.ts',
  // The contract from outside (issue 37, acceptance 1): what black-box clients check of
  // api-v1.md, decisions.md and admin-api.md (fields, error codes and envelopes, the admin API,
  // the seed's JSON, the OpenAPI document's promises), and faults that must lose no acknowledged
  // event nor count one twice.
  'test/integration/blackbox.test.ts',
  'test/integration/events-errors.test.ts',
  'test/integration/input-edge.test.ts',
  'test/integration/http-core.test.ts',
  'test/integration/auth.test.ts',
  'test/integration/key-issuance.test.ts',
  'test/integration/public-traffic-limits.test.ts',
  // Signed click references: the load probes a link, the write records the click on the brand's shards.
  'test/integration/throttled-clicks.test.ts',
  'test/integration/admin.test.ts',
  'test/integration/seed.test.ts',
  'test/integration/openapi-conformance.test.ts',
  'test/integration/openapi-examples.test.ts',
  'test/integration/openapi-typed-client.test.ts',
  'test/integration/dry-run.test.ts',
  'test/integration/direct-routes.test.ts',
  'test/integration/csv.test.ts',
  'test/integration/browser-script.test.ts',
  'test/integration/browser-signal-counts.test.ts',
  'test/integration/operations.test.ts',
  'test/integration/faults.test.ts',
];

const unavailable = citusUnavailable();
if (unavailable)
  process.stderr.write(
    `test:citus skipped: ${unavailable}. Point it at a cluster with CITUS_URL=postgres://user@coordinator:port/postgres ` +
      `(a coordinator whose postgres database has the citus extension and its workers added), ` +
      `or put the Citus build in ../shared/citus (its README).\n`,
  );

export default defineConfig({
  test: {
    globalSetup: unavailable ? [] : ['test/setup/citus-global-setup.ts'],
    // CITUS_FILES=a.test.ts,b.test.ts tries other files on the cluster (the next ones to make pass).
    include: unavailable ? [] : (process.env.CITUS_FILES?.split(',') ?? citusFiles),
    passWithNoTests: true,
    testTimeout: 60_000,
    // A file's database is made and migrated on three servers before its first test.
    hookTimeout: 180_000,
    pool: 'forks',
    // Coordinator, two workers and the service share the machine's cores.
    maxWorkers: 2,
    isolate: false,
    setupFiles: ['test/setup/per-file.ts'],
  },
});
