// test/integration/reconciliations.test.ts again, with the service behind a real transaction pooler:
// uploads (JSON, and CSV staged by COPY in one transaction), the comparison and its job, the
// differences, the resend, refusals that keep nothing, and the job found again after Redis lost it.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(() => import('../integration/reconciliations.test.js'));
