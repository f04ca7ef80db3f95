// test/integration/key-cache.test.ts again, with the service behind a real transaction pooler.
import { runThroughPooler } from '../setup/pooler.js';

await runThroughPooler(() => import('../integration/key-cache.test.js'));
