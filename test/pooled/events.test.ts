// test/integration/events.test.ts again, with the service behind a real transaction pooler.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(() => import('../integration/events.test.js'));
