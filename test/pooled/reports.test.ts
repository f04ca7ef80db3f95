// test/integration/reports.test.ts again, with the service behind a real transaction pooler:
// the report's statements, and report-rollup's fold and VACUUM of the tallies.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(() => import('../integration/reports.test.js'));
