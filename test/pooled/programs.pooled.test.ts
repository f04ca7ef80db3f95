// The commission program's endpoints and jobs again, with the service behind a real transaction
// pooler: versions created, changed and published (the brand's lock), GET /v1/commission_program,
// PUT …/tier and its webhook (commission-program-versions.test.ts); the preview, whose
// transaction sets its own isolation (commission-preview.test.ts); the creator-tiers job, by
// itself and through POST /admin/api/jobs/creator-tiers/run (creator-tiers-job.test.ts); a
// recalculation's job, chunk by chunk, with its figures (orders_changed and the rest), its
// adjustments and the journal summing to the orders' lines, resumed from its cursor and swept up
// (commission-recalculations.test.ts), and the explanation of a recalculated order
// (recalculation-explanation.test.ts). Each file's teardown fails it if anything was left on a
// pooled server connection.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(async () => {
  await import('../integration/commission-program-versions.test.js');
  await import('../integration/commission-preview.test.js');
  await import('../integration/creator-tiers-job.test.js');
  await import('../integration/commission-recalculations.test.js');
  await import('../integration/recalculation-explanation.test.js');
});
